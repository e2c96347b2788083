"""What a call costs: a price table in USD per million tokens.

The built-in table lists a few common OpenAI models at their published list
prices (2025); prices change, so a config file's `[llm.prices."<model>"]`
entries override or extend it. A dated model name ("gpt-4o-mini-2024-07-18")
takes the price of its longest listed prefix. The offline backend is free; a
model with no price counts as $0 and the ledger says so once.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Mapping

BARE_KEY = re.compile(r"^[A-Za-z0-9_-]+$")


@dataclass(frozen=True)
class Price:
    input: float                      # USD per 1M prompt tokens
    output: float                     # USD per 1M completion tokens
    cached_input: float | None = None # USD per 1M prompt tokens served by the provider's prompt cache

    def __post_init__(self):
        for name in ("input", "output", "cached_input"):
            v = getattr(self, name)
            if v is not None and (not isinstance(v, (int, float)) or v < 0):
                raise ValueError(f"price {name} must be a number >= 0 (USD per million tokens), got {v!r}")

    def cost(self, prompt_tokens: int, completion_tokens: int, cached_tokens: int = 0) -> float:
        cached = min(max(cached_tokens, 0), prompt_tokens)
        cached_rate = self.input if self.cached_input is None else self.cached_input
        return ((prompt_tokens - cached) * self.input + cached * cached_rate
                + completion_tokens * self.output) / 1_000_000


DEFAULT_PRICES: dict[str, Price] = {
    "gpt-4o-mini": Price(0.15, 0.60, 0.075),
    "gpt-4o": Price(2.50, 10.00, 1.25),
    "gpt-4.1": Price(2.00, 8.00, 0.50),
    "gpt-4.1-mini": Price(0.40, 1.60, 0.10),
    "gpt-4.1-nano": Price(0.10, 0.40, 0.025),
    "o3": Price(2.00, 8.00, 0.50),
    "o3-mini": Price(1.10, 4.40, 0.55),
    "o4-mini": Price(1.10, 4.40, 0.275),
    "gpt-5": Price(1.25, 10.00, 0.125),
    "gpt-5-mini": Price(0.25, 2.00, 0.025),
    "gpt-5-nano": Price(0.05, 0.40, 0.005),
}

FREE = Price(0.0, 0.0, 0.0)


def price_from_dict(model: str, data: Mapping) -> Price:
    unknown = set(data) - {"input", "output", "cached_input"}
    if unknown:
        raise ValueError(f"price of {model!r}: unknown keys {sorted(unknown)} "
                         "(use input, output, cached_input -- USD per million tokens)")
    missing = {"input", "output"} - set(data)
    if missing:
        raise ValueError(f"price of {model!r}: missing {sorted(missing)} (USD per million tokens)")
    return Price(data["input"], data["output"], data.get("cached_input"))


def how_to_price(model: str) -> str:
    """Both ways to give `model` a price: a config file, or --llm on any command line (a run
    started without a file has none to add it to)."""
    key = model if BARE_KEY.match(model) else '"' + model.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return (f"--llm 'prices.{key}={{input=0.2,output=0.6}}' with its own USD per million tokens, "
            f"or [llm.prices.{key}] with input and output in a --config file")


class PriceTable:
    def __init__(self, overrides: Mapping[str, Mapping | Price] | None = None, *, defaults: bool = True):
        self._prices: dict[str, Price] = dict(DEFAULT_PRICES) if defaults else {}
        for model, p in (overrides or {}).items():
            self._prices[model] = p if isinstance(p, Price) else price_from_dict(model, p)

    def lookup(self, model: str, backend: str = "openai") -> Price | None:
        """The price of `model`, or None when it is not listed."""
        if backend == "offline":
            return FREE
        if model in self._prices:
            return self._prices[model]
        prefixes = [k for k in self._prices if model.startswith(k + "-")]
        return self._prices[max(prefixes, key=len)] if prefixes else None

    def as_dict(self) -> dict[str, dict]:
        return {m: {"input": p.input, "output": p.output, "cached_input": p.cached_input}
                for m, p in sorted(self._prices.items())}
