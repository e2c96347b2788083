"""The LLM options the commands share (evolve, eval, baselines, serve, memory): defined once, with
the Python API, in mstar/library/llm_options.py; the commands import them from here."""
from mstar.library.llm_options import (add_llm_args, check_llm_numbers, paced_line,  # noqa: F401
                                       resolve_llm)
