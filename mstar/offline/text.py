"""Text helpers shared by the offline (LLM-free) models.

Everything here is pure and deterministic: tokenising, a light stemmer, content words, sentence
and turn splitting, session-date markers and salience ranking. The offline models stand in for
an LLM, so these helpers only need to be good enough that a better memory program gives a
visibly better score (see /work/shared/notes/offline-agent.md), and fast enough for thousands of
calls a minute.

Episode format the helpers understand (LoCoMo-style, but nothing depends on LoCoMo):
    [3:10 pm on 14 March, 2024] Session 2 — Maya and Tom
    Maya: I started pottery classes last week.
    Tom: Nice! ...
A line that starts with a bracket holding a date is a *date marker*; it dates every unit after it
until the next marker. Text after the bracket on the same line is a unit of its own unless it is
a session header, so programs that stamp every stored turn with "[date] Speaker: text" work too.
"""
from __future__ import annotations

import datetime as dt
import math
import re
from collections import Counter
from dataclasses import dataclass
from functools import lru_cache

# A small, hand-picked English function-word list: words that carry no topic on their own.
STOPWORDS = frozenset("""
a about above after again against all also am an and any are as at be because been before being
below between both but by can could did do does doing done down during each either else ever
every few for from further get gets got had has have having he her here hers herself him himself
his how i if in into is it its itself just let like me more most much my myself neither no nor
not now of off on once only or other our ours ourselves out over own really same she should so
some such than that the their theirs them themselves then there these they this those through
to too under until up upon us very was we were what whatever when where whether which while who
whom whose why will with within without would yes yet you your yours yourself yourselves
s t d ll m re ve don didn doesn isn wasn weren won wouldn couldn shouldn aren hasn haven hadn
oh hey hi hello yeah ok okay wow thanks thank gonna wanna lot lots thing things something
anything everything kind sort quite pretty well still even though always never sometimes
one ones maybe sure great good nice cool awesome glad
go goes going went gone come came make made take took say said tell told know knew think
thought feel felt want wanted see saw look looked last next new time times
i'm i've i'll i'd you're you've you'll you'd he'll he'd she'll she'd we're we've we'll we'd
they're they've they'll they'd it'll that'll there'll don't doesn't didn't isn't aren't wasn't
weren't won't wouldn't can't couldn't shouldn't haven't hasn't hadn't let's y'all
""".split())

# Words that open questions or instructions; never evidence of a topic.
QUESTION_WORDS = frozenset(
    "what when where which who whom whose why how did does do is are was were can could would "
    "should will has have had kind type sort".split()
)

MONTHS = ("january", "february", "march", "april", "may", "june", "july", "august",
          "september", "october", "november", "december")
NUMBER_WORDS = {w: i for i, w in enumerate(
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
    "fifteen sixteen seventeen eighteen nineteen twenty".split())}
WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
NUMBER_TOKENS = frozenset(NUMBER_WORDS) | frozenset(
    "thirty forty fifty sixty seventy eighty ninety hundred thousand million billion dozen "
    "half once twice".split())
TIME_WORDS = frozenset(MONTHS) | frozenset(WEEKDAYS) | frozenset(
    "yesterday today tonight tomorrow morning afternoon evening night week weekend month year "
    "ago spring summer autumn fall winter christmas".split())
COLOUR_WORDS = frozenset(
    "red orange yellow green blue purple violet pink brown black white grey gray teal navy "
    "turquoise beige cream gold golden silver maroon crimson scarlet lavender lilac magenta "
    "cyan indigo olive mint sage coral peach ivory amber burgundy tan charcoal".split())
# Words that open or pad a chat sentence: capitalised at its start, yet neither a name nor an
# answer.
DISCOURSE_WORDS = frozenset(
    "since sorry actually anyway anyways apparently basically besides btw certainly congrats "
    "congratulations definitely especially eventually exactly finally fortunately "
    "unfortunately hopefully honestly however instead luckily meanwhile obviously otherwise "
    "perhaps please probably seriously suddenly surely therefore totally absolutely although "
    "though whenever wherever guess wait listen yep nope yup hmm haha lol omg alright right "
    "true amazing wonderful awesome highly already recently usually currently".split())

# Letters of any script and digits, with apostrophes inside a word kept ("Lucía", "O'Neill",
# "Hermann's", "don't"); hyphens split words so "thirty-four" meets "thirty four".
_WORD_RE = re.compile(r"[^\W_]+(?:['’][^\W_]+)*")
_SPEAKER_RE = re.compile(r"^\s*([A-Z][\w.'-]*(?: [A-Z][\w.'-]*){0,2})\s*:\s+(.*)$")
_BRACKET_RE = re.compile(r"^\s*\[([^\]]{1,80})\]\s*(.*)$")
_DATE_LINE_RE = re.compile(r"^\s*(?:session\s+)?date(?:[ _-]?time)?\s*[:=]\s*(.+)$", re.I)
# A bracket holds a date when it has a year, a numeric date, or a month name next to a number
# ("[May I ask?]" is not a date).
_HAS_DATE_RE = re.compile(r"\b(?:19|20)\d\d\b|\b\d{1,2}[/.-]\d{1,2}[/.-]\d{2,4}\b|"
                          r"\b\d{1,2}(?:st|nd|rd|th)? (?:%s)\b|\b(?:%s) \d{1,2}\b"
                          % (("|".join(m[:3] + r"[a-z]*" for m in MONTHS),) * 2), re.I)
_SENTENCE_END_RE = re.compile(r"(?<=[.!?])[\"')\]]*\s+(?=[\"'(\[]?[A-Z0-9])")
# Titles and abbreviations whose full stop does not end a sentence ("Mrs. Abernathy").
_ABBREV_END_RE = re.compile(r"(?:^|\s)(?:mr|mrs|ms|dr|prof|st|sr|jr|mt|vs|etc|approx)\.$",
                            re.I)
_SESSION_HEADER_RE = re.compile(r"^\s*(?:session\b|[—–-]\s|$)", re.I)


def tokens(text: str) -> list[str]:
    """Lower-case word tokens; a possessive "'s" is dropped ("Maya's" -> "maya")."""
    out = []
    for raw in _WORD_RE.findall(text):
        word = raw.lower().replace("’", "'")
        if word.endswith("'s"):
            word = word[:-2]
        out.append(word)
    return out


def surface_words(text: str) -> list[str]:
    """Original-case word tokens (possessive kept off), for building answers from text."""
    return [w[:-2] if w.lower().endswith(("'s", "’s")) else w for w in _WORD_RE.findall(text)]


@lru_cache(maxsize=65536)
def stem(word: str) -> str:
    """A light suffix stripper so that "painted"/"painting"/"paints" meet "paint".

    Deliberately crude (no Porter rules): both sides of every comparison go through the same
    function, so consistency matters more than linguistic accuracy.
    """
    w = word.lower()
    if len(w) <= 3 or w.isdigit():
        return w
    for suffix in ("ingly", "edly", "ing", "ies", "ied", "ed", "es", "ly", "s"):
        if w.endswith(suffix) and len(w) - len(suffix) >= 3:
            w = w[: -len(suffix)]
            if suffix in ("ies", "ied"):
                w += "y"
            break
    if len(w) > 3 and w[-1] == w[-2] and w[-1] not in "aeiouls":
        w = w[:-1]  # "shopp" -> "shop", "swimm" -> "swim"
    elif len(w) > 3 and w[-1] == "e" and w[-2] not in "aeiou":
        w = w[:-1]  # "charge"/"charging" -> "charg", "bake"/"baked" -> "bak"
    return w


def is_content(word: str) -> bool:
    """True for a lower-case token that carries topic: not a stopword, not a 1-letter token."""
    return word not in STOPWORDS and (len(word) > 1 or word.isdigit())


def content_words(text: str) -> list[str]:
    """Stemmed content words of `text`, in order, with repeats."""
    return [stem(w) for w in tokens(text) if is_content(w)]


def content_set(text: str) -> set[str]:
    return set(content_words(text))


def query_terms(question: str) -> set[str]:
    """Stemmed content words of a question, minus question words ("when", "kind", ...)."""
    return {stem(w) for w in tokens(question) if is_content(w) and w not in QUESTION_WORDS}


def split_sentences(text: str) -> list[str]:
    """Split a paragraph into sentences at . ! ? followed by a capital; never returns blanks."""
    out: list[str] = []
    for part in _SENTENCE_END_RE.split(text.strip()):
        part = part.strip()
        if not part:
            continue
        if out and _ABBREV_END_RE.search(out[-1]):
            out[-1] = f"{out[-1]} {part}"
        else:
            out.append(part)
    return out


def marker_date(line: str) -> str | None:
    """The date carried by a date-marker line, or None if the line is not a marker.

    "[3:10 pm on 14 March, 2024] Session 2 — ..." -> "14 March, 2024" (time of day dropped);
    "Date: 2024-03-14" -> "2024-03-14". A bracket without a date in it ("[D1:3]",
    "[shares a photo]") is not a marker.
    """
    m = _BRACKET_RE.match(line)
    inner = m.group(1) if m else None
    if inner is None:
        d = _DATE_LINE_RE.match(line)
        inner = d.group(1) if d else None
    if inner is None or not _HAS_DATE_RE.search(inner):
        return None
    inner = inner.strip()
    if " on " in inner:
        inner = inner.split(" on ", 1)[1]
    return inner.strip().rstrip(".")


def strip_marker(line: str) -> str:
    """The text after a leading date bracket ("" for a pure marker or a session header)."""
    m = _BRACKET_RE.match(line)
    if not m or marker_date(line) is None:
        return line
    rest = m.group(2)
    return "" if _SESSION_HEADER_RE.match(rest) else rest


def split_speaker(line: str) -> tuple[str | None, str]:
    """("Maya", "I started pottery.") for "Maya: I started pottery."; (None, line) otherwise."""
    m = _SPEAKER_RE.match(line)
    if not m:
        return None, line.strip()
    return m.group(1), m.group(2).strip()


@dataclass(frozen=True)
class Unit:
    """One sentence of a memory text with what the answerer needs to know about it."""
    text: str            # the sentence, without speaker prefix
    speaker: str | None  # speaker label of its turn, if any
    date: str | None     # date of the nearest marker before it, if any
    line: int            # index of its source line (units of one turn share it)
    marker_line: int | None  # index of that marker line, if any


def split_units(text: str) -> list[Unit]:
    """Split a memory text into dated, speaker-attributed sentences.

    Marker lines set the current date; a speaker prefix on a line applies to all its sentences.
    """
    units: list[Unit] = []
    date: str | None = None
    marker_at: int | None = None
    for i, line in enumerate(text.splitlines()):
        if not line.strip():
            continue
        found = marker_date(line)
        if found is not None:
            date, marker_at = found, i
            line = strip_marker(line)
            if not line.strip():
                continue
        speaker, body = split_speaker(line)
        for sentence in split_sentences(body):
            units.append(Unit(sentence, speaker, date, i, marker_at))
    return units


def idf_weights(docs: list[set[str]]) -> dict[str, float]:
    """Smoothed inverse document frequency of each term over `docs` (sets of terms)."""
    df: Counter[str] = Counter()
    for doc in docs:
        df.update(doc)
    n = len(docs)
    return {t: math.log(1.0 + n / c) for t, c in df.items()}


def ranked_terms(text: str, k: int) -> list[str]:
    """Up to k salient words of `text` (surface form, lower-case), best first.

    Salience = frequency in the text × rarity across its sentences, so a word repeated in one
    stretch of the text beats a word sprinkled everywhere. Ties keep first-appearance order.
    """
    sentences = [s for line in text.splitlines() for s in split_sentences(strip_marker(line))]
    idf = idf_weights([content_set(s) for s in sentences])
    freq: Counter[str] = Counter()
    form: dict[str, str] = {}
    order: dict[str, int] = {}
    for w in tokens(" ".join(sentences)):
        if not is_content(w) or w in QUESTION_WORDS or w.isdigit():
            continue
        s = stem(w)
        freq[s] += 1
        form.setdefault(s, w)
        order.setdefault(s, len(order))
    scored = sorted(freq, key=lambda s: (-freq[s] * idf.get(s, 0.0), order[s]))
    return [form[s] for s in scored[:k]]


def capitalised_names(text: str) -> list[str]:
    """Speaker labels and capitalised non-initial words, most frequent first (ties: first seen).

    A crude named-entity guess: a capitalised word that is not a stopword and not the first word
    of its sentence. Speaker labels count double because they are known to be people.
    """
    counts: Counter[str] = Counter()
    order: dict[str, int] = {}

    def add(name: str, n: int) -> None:
        counts[name] += n
        order.setdefault(name, len(order))

    for line in text.splitlines():
        speaker, body = split_speaker(strip_marker(line))
        if speaker:
            add(speaker, 2)
        for sentence in split_sentences(body):
            words = surface_words(sentence)
            for w in words[1:]:
                if w[0].isupper() and w.lower() not in STOPWORDS and w.lower() not in MONTHS + WEEKDAYS \
                        and not w.isupper() and len(w) > 1 and "'" not in w and "’" not in w:
                    add(w, 1)
    return sorted(counts, key=lambda n: (-counts[n], order[n]))


def salient_sentences(text: str, k: int, max_chars: int) -> list[str]:
    """Up to k sentences that best cover the text's salient words, in original order.

    Each sentence keeps its speaker prefix ("Maya: ...") because who said it is part of the fact.
    The total length is capped at max_chars (whole sentences; the first is cut if it alone is
    longer).
    """
    items: list[tuple[int, str, set[str]]] = []
    for i, line in enumerate(text.splitlines()):
        speaker, body = split_speaker(strip_marker(line))
        for sentence in split_sentences(body):
            shown = f"{speaker}: {sentence}" if speaker else sentence
            items.append((len(items), shown, content_set(sentence)))
    if not items:
        return []
    idf = idf_weights([terms for _, _, terms in items])
    freq: Counter[str] = Counter(t for _, _, terms in items for t in terms)
    weight = {t: freq[t] * idf[t] for t in freq}

    def score(item: tuple[int, str, set[str]]) -> float:
        terms = item[2]
        # fsum: exact, so the result does not depend on the set's (hash-seeded) order.
        return math.fsum(weight[t] for t in terms) / math.sqrt(len(terms) + 1.0)

    best = sorted(items, key=lambda it: (-score(it), it[0]))[:k]
    chosen, used = [], 0
    for _, shown, _ in sorted(best):
        if used and used + len(shown) + 1 > max_chars:
            continue
        chosen.append(shown[:max_chars])
        used += len(chosen[-1]) + 1
    return chosen


def extract_tag(text: str, tag: str) -> str | None:
    """Contents of the first <tag ...>…</tag> in text (stripped), or None when absent."""
    m = re.search(rf"<{tag}(?:\s[^>]*)?>(.*?)</{tag}>", text, re.S)
    return m.group(1).strip() if m else None


# ---------------------------------------------------------------- dates

# An explicit date inside a sentence: "14 March, 2024", "March 2024", "in 2019" (group 1).
EXPLICIT_DATE_RE = re.compile(
    r"\b(?:\d{1,2} )?(?:%s)(?: \d{1,2})?,? (?:19|20)\d\d\b|\b(?:in|since|back in|from) "
    r"((?:19|20)\d\d)\b" % "|".join(m.capitalize() for m in MONTHS))

_RELATIVE_EXPR = re.compile(
    r"\b(yesterday|today|tonight|tomorrow|last night|this morning"
    r"|(?:last|next|this) (?:week(?:end)?|month|year)|last (?:%s)"
    r"|(?:\d{1,2}|%s|a few|a couple of) (?:days?|weeks?|months?|years?) ago)\b"
    % ("|".join(WEEKDAYS), "|".join(NUMBER_WORDS)), re.I)


def parse_date(text: str) -> dt.date | None:
    """A calendar date from "14 March, 2024", "March 14, 2024", "2024-03-14", ...; else None."""
    cleaned = re.sub(r"\s+", " ", text.replace(",", ", ")).replace(" ,", ",").strip()
    for fmt in ("%d %B, %Y", "%d %B %Y", "%B %d, %Y", "%B %d %Y", "%Y-%m-%d", "%d %b, %Y",
                "%d %b %Y", "%b %d, %Y"):
        try:
            return dt.datetime.strptime(cleaned, fmt).date()
        except ValueError:
            continue
    return None


def format_date(day: dt.date) -> str:
    """The marker style: "14 March, 2024"."""
    return f"{day.day} {MONTHS[day.month - 1].capitalize()}, {day.year}"


def resolve_relative(sentence: str, session_date: str) -> str | None:
    """The absolute form of the first relative time expression in `sentence`, or None.

    Dated 8 May, 2023: "yesterday" -> "7 May, 2023"; "last Friday" -> "the friday before
    8 May, 2023"; "last week" -> "the week before 8 May, 2023"; "last year" -> "2022";
    "last month" -> "April 2023"; "two weeks ago" -> "two weeks before 8 May, 2023".
    Day/month/year arithmetic needs a parseable session date; otherwise None for those.
    """
    m = _RELATIVE_EXPR.search(sentence)
    if not m:
        return None
    expr = m.group(1).lower()
    if expr in ("today", "tonight", "this morning"):
        return session_date
    if expr.endswith(" ago"):
        return f"{expr[:-4]} before {session_date}"
    head, _, unit = expr.partition(" ")
    if unit in ("week", "weekend") or unit in WEEKDAYS:
        word = {"last": "before", "next": "after", "this": "of"}[head]
        return f"the {unit} {word} {session_date}"
    day = parse_date(session_date)
    if day is None:
        return None
    if expr in ("yesterday", "last night"):
        return format_date(day - dt.timedelta(days=1))
    if expr == "tomorrow":
        return format_date(day + dt.timedelta(days=1))
    shift = {"last": -1, "next": 1, "this": 0}[head]
    if unit == "year":
        return str(day.year + shift)
    month0 = day.month - 1 + shift  # unit == "month"
    return f"{MONTHS[month0 % 12].capitalize()} {day.year + month0 // 12}"
