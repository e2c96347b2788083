"""Tests for the offline (LLM-free) task, toolkit and judge models and their text helpers."""
import json
import time
from pathlib import Path

import pytest

from mstar.agent import (build_answer_messages, build_extraction_messages, build_query_messages,
                         parse_json_object)
from mstar.offline.judge_model import OfflineJudgeModel
from mstar.offline.task_model import (SHORT_CAP, OfflineTaskModel, answer, field_kind,
                                      is_directive, read_directives)
from mstar.offline.question_kinds import question_info, question_parts
from mstar.offline.text import (content_words, marker_date, ranked_terms, resolve_relative,
                                split_sentences, split_units, stem, surface_words, tokens)
from mstar.offline.toolkit_model import OfflineToolkitModel, find_query_and_text

MEMORY = """[10:00 am on 2 February, 2024] Session 1 — Maya and Tom
Maya: Hi Tom! I finally finished painting the mural at the community library.
Tom: Amazing. I went hiking in the Cairngorms with my brother yesterday.
Maya: My sister Lena is moving to Lisbon in April.

[3:10 pm on 14 March, 2024] Session 2 — Maya and Tom
Maya: Guess what, I adopted a rescue greyhound called Biscuit last week!
Tom: That is wonderful news. I started cello lessons with my neighbour Clara.
Maya: Biscuit sleeps on the sofa all day.

[7:45 pm on 30 April, 2024] Session 3 — Maya and Tom
Tom: My first cello recital went well, Clara was proud.
Maya: I ran a charity 10k race last Sunday and raised money for the animal shelter."""

BASE = "Answer the question using the retrieved memory. Be short and specific."


def ask(question, instruction=BASE, memory=MEMORY, always_on=""):
    return OfflineTaskModel().complete(build_answer_messages(always_on, memory, question,
                                                             instruction))


# ---------------------------------------------------------------- text helpers

def test_marker_dates_and_units():
    assert marker_date("[3:10 pm on 14 March, 2024] Session 2 — Maya and Tom") == "14 March, 2024"
    assert marker_date("[2024-03-14] Maya: hi") == "2024-03-14"
    assert marker_date("Date: 14 March 2024") == "14 March 2024"
    assert marker_date("[D1:3] Maya: hi") is None and marker_date("Maya: [2 dogs]") is None
    units = split_units(MEMORY)
    greyhound = next(u for u in units if "greyhound" in u.text)
    assert greyhound.speaker == "Maya" and greyhound.date == "14 March, 2024"
    assert not any("Session" in u.text for u in units)  # headers are not content
    stamped = split_units("[14 March, 2024] Tom: I play the cello.")
    assert stamped[0].date == "14 March, 2024" and stamped[0].speaker == "Tom"


def test_stemming_and_salient_terms():
    assert stem("painted") == stem("painting") == stem("paints") == "paint"
    assert content_words("Maya's dogs were running") == ["maya", "dog", "run"]
    terms = ranked_terms(MEMORY, 5)
    assert "cello" in terms and "the" not in terms


def test_resolve_relative_dates():
    assert resolve_relative("I went yesterday", "8 May, 2023") == "7 May, 2023"
    assert resolve_relative("last Sunday I ran", "8 May, 2023") == "the sunday before 8 May, 2023"
    assert resolve_relative("since last year", "8 May, 2023") == "2022"
    assert resolve_relative("last month", "14 January, 2024") == "December 2023"
    assert resolve_relative("two weeks ago", "8 May, 2023") == "two weeks before 8 May, 2023"
    assert resolve_relative("nothing relative here", "8 May, 2023") is None


# ---------------------------------------------------------------- answering

def test_answer_picks_the_span_of_the_matching_turn():
    reply = ask("What instrument did Tom start lessons on?")
    assert "cello" in reply.lower()
    assert "tom" not in reply.lower() and "lessons" not in reply.lower()  # question words dropped
    assert "greyhound" in ask("What kind of dog did Maya adopt?").lower()
    assert "Lisbon" in ask("Where is Maya's sister Lena moving?")


def test_when_questions_get_the_session_date_of_the_best_turn():
    assert ask("When did Maya adopt a greyhound?") == "14 March, 2024"
    assert ask("When did Tom have his first cello recital?") == "30 April, 2024"
    assert ask("In what year did Maya adopt Biscuit?") == "2024"
    assert ask("In which month did Tom give his cello recital?") == "April 2024"


def test_when_question_without_a_marker_falls_back_to_a_span():
    memory = "Maya: I adopted a rescue greyhound called Biscuit."
    reply = ask("When did Maya adopt a greyhound?", memory=memory)
    assert reply and "2024" not in reply and "Biscuit" in reply


def test_word_cap_directive_and_default_cap():
    long_turn = ("Tom: I bought a red vintage wooden sailing boat with brass fittings, white "
                 "sails, teak decks and a tiny cabin.")
    default = ask("What did Tom buy?", memory=long_turn)
    assert len(default.split()) == SHORT_CAP and default in long_turn
    # Under a cap the answer is the best span that fits, not the default cut short.
    capped = ask("What did Tom buy?", BASE + " Answer in at most 3 words.", memory=long_turn)
    assert 1 <= len(capped.split()) <= 3 and capped in long_turn
    two = ask("What did Tom buy?", "Use no more than two words.", memory=long_turn)
    assert 1 <= len(two.split()) <= 2 and two in long_turn


def test_directive_can_switch_the_date_rule_off():
    reply = ask("When did Maya adopt a greyhound?",
                BASE + " Do not answer with the session date; quote the memory instead.")
    assert reply == "last week"  # the time phrase of the matching turn, not the session date


def test_relative_date_directive_resolves_against_the_session_date():
    question = "When did Maya run the charity race?"
    assert ask(question) == "30 April, 2024"
    on = BASE + " Convert relative dates like yesterday or last week using the session date."
    assert ask(question, on) == "the sunday before 30 April, 2024"
    assert ask(question, on + " Answer in at most 3 words.") == ask(question, on)  # dates uncut
    assert ask("When did Tom go hiking?", on) == "1 February, 2024"
    assert ask(question, "Do not convert relative dates.") == "30 April, 2024"


def test_always_on_directives_apply_and_are_never_quoted():
    rule = "Convert relative dates such as yesterday or last week into session-based dates."
    reply = ask("When did Maya run the charity race?", always_on=rule)
    assert reply == "the sunday before 30 April, 2024"
    # The instruction is read after ALWAYS_ON, so it wins a conflicting cap.
    d = read_directives("Keep every answer to at most 6 words.", "Answer in at most 2 words.")
    assert d.max_words == 2
    assert is_directive(rule) and not is_directive("Maya: I like dates and figs.")
    assert "Convert" not in ask("What relative dates convert?", always_on=rule)


def test_empty_memory_and_abstain_directive():
    assert ask("What did Tom buy?", memory="") == "unknown"
    assert ask("What did Tom buy?", memory="No information stored.") == "unknown"
    unrelated = "Where did the astronaut land the rocket?"
    assert ask(unrelated) != "unknown"
    assert ask(unrelated, BASE + " If the memory has nothing on it, say unknown.") == "unknown"


def test_full_sentence_and_long_form():
    full = ask("What instrument did Tom start lessons on?", "Answer in a full sentence.")
    assert full == "I started cello lessons with my neighbour Clara."
    long_question = ("I am putting together a long letter for my friend and would like to "
                     "mention everything that happened with Biscuit the greyhound and the "
                     "animal shelter over the past months so that nothing important is left out.")
    reply = ask(long_question)
    assert len(reply.split()) > SHORT_CAP and "greyhound" in reply and "shelter" in reply
    assert "mural" not in reply  # sentences sharing no word with the question stay out


# ---------------------------------------------------------------- answer spans

SPANS = """[2:00 pm on 5 May, 2024] Session 4 — Ana and Ben
Ben: My manager Lucía runs the design team at work.
Ana: I adopted a tortoise last month.
Ana: A Hermann's tortoise named Atlas.
Ben: How much did the boat repairs cost you?
Ana: Eight hundred dollars, sadly.
Ana: My grandmother lives in Otaru now.
Ana: I baked a lemon drizzle cake for the party.
Ben: We painted the garden shed sage green.
Ben: Sean O'Neill coached our rowing team for thirty-four years.
Ana: My favourite novel is "The Quiet Harbour" by a local author."""


@pytest.mark.parametrize("question, expected", [
    ("Who is Ben's manager at work?", "Lucía"),                       # who -> name
    ("Who coached Ben's rowing team?", "Sean O'Neill"),               # names with apostrophes
    ("What is the name of Ana's tortoise?", "Atlas"),                 # "name of" -> after "named"
    ("Where does Ana's grandmother live?", "Otaru"),                  # where -> place
    ("How much did Ana's boat repairs cost?", "Eight hundred dollars"),  # answer in next turn
    ("How many years did Sean O'Neill coach the rowing team?", "thirty-four years"),
    ("What kind of tortoise did Ana adopt?", "Hermann's tortoise"),   # modifiers + head noun
    ("What cake did Ana bake for the party?", "lemon drizzle cake"),
    ("What colour did Ben paint the garden shed?", "sage green"),
    ("What is Ana's favourite novel?", "Quiet Harbour"),              # a quotation
])
def test_answers_are_typed_contiguous_spans(question, expected):
    assert ask(question, memory=SPANS) == expected


def test_span_answers_keep_the_memory_text_and_handle_question_forms():
    # The span is the memory's own text, so it scores against gold written the same way.
    assert ask("What kind of tortoise did Ana adopt?", memory=SPANS) in SPANS
    # Two-part questions get one span per part; yes/no questions "Yes" and the evidence.
    assert ask("Who is Ben's manager at work, and where does Ana's grandmother live?",
               memory=SPANS) == "Lucía, Otaru"
    yes = ask("Is Ana likely to own a pet tortoise?", memory=SPANS)
    assert yes.startswith("Yes, ") and yes[5:] in SPANS
    # A when-question without the date rule gets the turn's time phrase.
    assert ask("When did Ana adopt a tortoise?", "Do not use session dates.",
               memory=SPANS) == "last month"
    assert ask("When did Ana adopt a tortoise?", memory=SPANS) == "5 May, 2024"
    # The cap bounds the span: one word for "Who ...?" is still the name.
    assert ask("Who coached Ben's rowing team?", "Answer in one word.", memory=SPANS) in (
        "Sean", "O'Neill")


def test_tokeniser_keeps_accented_letters_and_inner_apostrophes():
    assert tokens("Lucía met O'Neill and Hermann's tortoise; I don't know.") == [
        "lucía", "met", "o'neill", "and", "hermann", "tortoise", "i", "don't", "know"]
    assert surface_words("Saint-Saëns and Lucía's cat") == ["Saint", "Saëns", "and", "Lucía",
                                                            "cat"]
    assert content_words("I've already said I'm happy") == ["already", "happy"]  # no "i've"
    assert split_sentences("My teacher is Mrs. Abernathy. She is strict!") == [
        "My teacher is Mrs. Abernathy.", "She is strict!"]
    assert stem("charge") == stem("charging") and stem("bake") == stem("baked")


def test_question_kinds_and_head_nouns():
    cases = {"Who is Sam's manager?": ("name", None),
             "What is the name of Lena's cat?": ("name", None),
             "How many years did Ruth work there?": ("number", "year"),
             "Where does Hana's grandmother live?": ("place", None),
             "What colour did Lena repaint her van?": ("colour", None),
             "What kind of tortoise is Atlas?": ("thing", "tortoise"),
             "What rare bird did Ruth see?": ("thing", "bird"),
             "Which institute offered Elif a postdoc?": ("name", "institute"),
             "Why did Jonah sneeze?": ("reason", None),
             "When did Maya move?": ("time", None)}
    for question, expected in cases.items():
        info = question_info(question)
        kind, head = expected
        assert (info.kind, info.head) == (kind, head and stem(head)), question
    assert question_info("Is Noah likely to keep making furniture?").yes_no
    assert question_parts("Which park did Lena win, and what feature did they love?") == [
        "Which park did Lena win?", "what feature did they love?"]
    assert question_parts("What did Tom and Maya eat?") == ["What did Tom and Maya eat?"]


def test_span_answers_are_deterministic_whatever_the_call_order():
    questions = ["Who is Ben's manager at work?", "What cake did Ana bake for the party?",
                 "How much did Ana's boat repairs cost?", "Where does Ana's grandmother live?",
                 "What did Tom buy?"]
    forward = [answer(SPANS, q, BASE) for q in questions]
    backward = [answer(SPANS, q, BASE) for q in reversed(questions)][::-1]
    assert forward == backward
    assert forward == [answer(SPANS, q, BASE) for q in questions]


# ---------------------------------------------------------------- extraction / query

def test_field_kinds_follow_name_then_description():
    assert field_kind({"name": "session_date"}) == "date"
    assert field_kind({"name": "speaker_names"}) == "people"
    assert field_kind({"name": "tags"}) == "keywords"
    assert field_kind({"name": "x", "description": "A fact worth keeping"}) == "content"
    assert field_kind({"name": "topic", "description": "when it happened"}) == "topic"


def test_extraction_fills_fields_from_the_text():
    schema = [
        {"name": "when", "type": "str", "description": "Session date"},
        {"name": "speakers", "type": "list[str]", "description": ""},
        {"name": "topic", "type": "str", "description": ""},
        {"name": "keywords", "type": "list[str]", "description": ""},
        {"name": "facts", "type": "list[str]", "description": "Facts"},
        {"name": "content", "type": "str", "description": "What to remember"},
        {"name": "session_number", "type": "int", "default": 0},
        {"name": "score", "type": "float", "default": 0.5},
        {"name": "flag", "type": "bool", "default": None},
        {"name": "lesson", "type": "Optional[str]", "default": None},
    ]
    session = MEMORY.split("\n\n")[1]
    reply = OfflineTaskModel().complete(build_extraction_messages("Keep facts.", session, schema))
    item, warning = parse_json_object(reply)
    assert warning is None and list(item) == [f["name"] for f in schema]
    assert item["when"] == "14 March, 2024"
    assert item["speakers"][:2] == ["Maya", "Tom"] and "Biscuit" in item["speakers"]
    assert "biscuit" in item["keywords"] and all(k == k.lower() for k in item["keywords"])
    assert all(f.split(": ", 1)[1] in session for f in item["facts"])
    assert item["content"] and len(item["content"]) <= 400 and item["topic"]
    assert item["session_number"] == 2 and item["score"] == 0.5 and item["flag"] is False
    assert isinstance(item["lesson"], str) and item["lesson"]


def test_query_fills_fields_from_the_question():
    schema = [{"name": "query_text", "type": "str"}, {"name": "keywords", "type": "list[str]"},
              {"name": "person", "type": "Optional[str]"},
              {"name": "date_hint", "type": "str"}, {"name": "top_k", "type": "int", "default": 5}]
    reply = OfflineTaskModel().complete(
        build_query_messages("q", "What did Maya adopt in March 2024?", schema))
    query = json.loads(reply)
    assert query == {"query_text": "What did Maya adopt in March 2024?",
                     "keywords": ["maya", "adopt", "march", "2024"], "person": "Maya",
                     "date_hint": "March 2024", "top_k": 5}


def test_task_model_rejects_unknown_tasks_and_bad_schema():
    model = OfflineTaskModel()
    with pytest.raises(ValueError, match="unknown or missing <task>"):
        model.complete([{"role": "user", "content": "hello"}])
    with pytest.raises(ValueError, match="<schema> is not JSON"):
        model.complete([{"role": "user", "content":
                         "<task>formulate_query</task>\n<schema>\nnope\n</schema>"}])


# ---------------------------------------------------------------- toolkit

def _summarise_prompt(query, texts):
    return [{"role": "user", "content":
             "Given the query below, summarise only the information in the texts that is "
             f"relevant to it. Be concise and factual.\n\nQuery: {query}\n\nTexts:\n{texts}"}]


def test_toolkit_extract_keeps_relevant_turn_and_its_date_marker():
    out = OfflineToolkitModel().complete(_summarise_prompt("Biscuit the greyhound", MEMORY))
    lines = out.splitlines()
    assert "Maya: Biscuit sleeps on the sofa all day." in lines
    assert lines[0] == "[3:10 pm on 14 March, 2024] Session 2 — Maya and Tom"
    assert not any("Cairngorms" in line or "2 February" in line for line in lines)
    # The extract reads like memory: the answerer can still date it.
    assert answer(out, "When did Maya adopt a greyhound?", BASE) == "14 March, 2024"


def test_toolkit_extract_is_bounded_and_falls_back():
    big = "\n".join(f"[1 May, 2024] Tom: cello practice number {i} with Clara" for i in range(400))
    out = OfflineToolkitModel().complete(_summarise_prompt("cello practice", big))
    assert 0 < len(out) <= 1500 and out.startswith("[1 May, 2024] Tom: cello practice")
    no_match = OfflineToolkitModel().complete(_summarise_prompt("quantum chromodynamics", big))
    assert no_match == big[:1000]
    assert find_query_and_text("Question: who?\nContext: a b c") == ("who?", "a b c")
    assert find_query_and_text("Summarise this\nline two") == ("Summarise this", "line two")


# ---------------------------------------------------------------- judge

def test_judge_returns_valid_json_and_tracks_overlap():
    judge = OfflineJudgeModel()
    conversation = ("user: My ear has hurt for four days.\n"
                    "assistant: Please see a primary care provider or urgent care within 24 hours"
                    " and go immediately if you get a fever.")
    good = json.loads(judge.complete([{"role": "user", "content":
        f"# Conversation\n{conversation}\n\n# Rubric item\nRecommends seeing a primary care "
        "provider or urgent care within 24 hours.\n\n# Instructions\nReturn JSON."}]))
    assert set(good) == {"explanation", "criteria_met"} and good["criteria_met"] is True
    bad = json.loads(judge.complete([{"role": "user", "content":
        f"<conversation>\n{conversation}\n</conversation>\n<rubric_item>Explains leishmaniasis "
        "transmission by sandflies.</rubric_item>"}]))
    assert bad["criteria_met"] is False and isinstance(bad["explanation"], str)
    # Only the last assistant turn counts: the user's words do not satisfy a criterion.
    echo = json.loads(judge.complete([{"role": "user", "content":
        "# Conversation\nuser: Explain leishmaniasis transmission by sandflies.\nassistant: "
        "I cannot help.\n# Rubric item\nExplains leishmaniasis transmission by sandflies."}]))
    assert echo["criteria_met"] is False
    with pytest.raises(ValueError, match="no rubric item"):
        judge.complete([{"role": "user", "content": "hello"}])


# ---------------------------------------------------------------- determinism and speed

def test_models_are_deterministic():
    prompts = [
        build_extraction_messages("i", MEMORY, [{"name": "facts", "type": "list[str]"}]),
        build_query_messages("i", "Who is Clara?", [{"name": "q", "type": "str"}]),
        build_answer_messages("", MEMORY, "When did Tom go hiking?", BASE),
    ]
    for p in prompts:
        assert OfflineTaskModel().complete(p) == OfflineTaskModel().complete(p)
    tk = _summarise_prompt("cello", MEMORY)
    assert OfflineToolkitModel().complete(tk) == OfflineToolkitModel().complete(tk)


def test_answerer_is_fast_enough_for_locomo_scale():
    memory = (MEMORY + "\n") * 4  # ~3000 characters, like a read() result
    start = time.perf_counter()
    for i in range(300):
        answer(memory, f"What did Maya do with the greyhound number {i}?", BASE)
    assert time.perf_counter() - start < 15  # thousands of calls a minute, with margin


LOCOMO = Path("/work/shared/data/locomo/locomo10.json")


@pytest.mark.skipif(not LOCOMO.exists(), reason="LoCoMo data not available")
def test_date_rule_moves_the_score_on_real_locomo_questions():
    """With the evidence session as memory, the date rule must lift temporal-question F1."""
    import re
    import string
    from collections import Counter

    def f1(pred, gold):
        def norm(s):
            s = "".join(c for c in s.lower() if c not in string.punctuation)
            return re.sub(r"\b(a|an|the)\b", " ", s).split()
        p, g = norm(pred), norm(gold)
        common = sum((Counter(p) & Counter(g)).values())
        return 0.0 if not common else 2 * common / (len(p) + len(g))

    conv = json.loads(LOCOMO.read_text())[0]
    c = conv["conversation"]

    def session(n):
        turns = "\n".join(f"{t['speaker']}: {t['text']}" for t in c[f"session_{n}"])
        return f"[{c[f'session_{n}_date_time']}] Session {n}\n{turns}"

    temporal = [q for q in conv["qa"] if q["category"] == 2][:30]
    on = off = 0.0
    for q in temporal:
        memory = "\n".join(session(int(e.split(":")[0][1:])) for e in q["evidence"][:1])
        on += f1(answer(memory, q["question"], BASE), str(q["answer"]))
        off += f1(answer(memory, q["question"], "Do not use session dates."), str(q["answer"]))
    assert on / len(temporal) > off / len(temporal) + 0.1
