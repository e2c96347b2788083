"""Helper methods for the offline reflector's "reach" edits (mstar/offline/reach_mutations.py).

Same conventions as source_edits.HELPERS, into which they are merged: written at class-body
indent, plain names (RestrictedPython refuses a leading "_"), only the `re` and `math` modules,
and of the builtins only those RestrictedPython's safe_builtins hold (len, range, str ...; no
set, sum, max, sorted, list or dict: literals and methods instead). No parameter is named like
a knob the numeric mutations move (`max_chars=`, `rank_weight=`, `top_k =`), and no line outside
a `return` ends in `)[:N]`, so the knobs never touch these helpers.

What they do, in the words of the comments a reader of the evolved program sees:
  speaker_of / index_turns   file every dated turn under its speaker's name (write side)
  named_speakers             the indexed people a query names
  with_entity_evidence       the named people's best-matching turns in front of read()'s result
  bridge_evidence            "the person who ...": find the person, answer from their turns
  rank_by_stems              overlap ranking on four-letter word stems (the bridge's second hop)
  rank_newest_first          overlap ranking whose ties go to the newest dated entry
  date_key                   "[1:56 pm on 8 May, 2023] ..." -> 20230508 (0 when undated)
  spread_sessions            at most two entries per session first, the rest after
  entity_queries / merge_results   one chroma query per named entity, results interleaved
  drop_captions              the raw text without "[shares a photo of ...]" captions
"""
from __future__ import annotations

REACH_HELPERS: dict[str, tuple[tuple[str, ...], str]] = {
    "speaker_of": ((), '''
    def speaker_of(self, turn):
        # "[date] Name: text" or "Name: text" -> "name"; "" for a line without a speaker.
        text = turn.strip()
        if text.startswith("[") and "]" in text:
            text = text[text.index("]") + 1:].strip()
        if ":" not in text:
            return ""
        head = text.split(":", 1)[0].strip()
        if not head or not head[0].isupper() or len(head.split()) > 3 or len(head) > 40:
            return ""
        return head.lower()
'''),
    "index_turns": ((), '''
    def index_turns(self, raw_text):
        # File every dialogue turn, stamped with its session date, under its speaker's name: a
        # question about a person is then answered from that person's own words first.
        for turn in self.date_stamp(raw_text, self.split_turns(raw_text)):
            name = self.speaker_of(turn)
            if name:
                if name not in self.by_speaker:
                    self.by_speaker[name] = []
                self.by_speaker[name].append(turn)
'''),
    "named_speakers": ((), '''
    def named_speakers(self, query_text):
        # The indexed speakers the query names ("Caroline", "Melanie's"), in the query's order.
        names = []
        for word in query_text.replace("\\u2019", "'").split():
            name = word.strip(".,;:!?()[]\\"").lower()
            if name.endswith("'s"):
                name = name[:-2]
            if name in self.by_speaker and name not in names:
                names.append(name)
        return names
'''),
    "with_entity_evidence": ((), '''
    def with_entity_evidence(self, query_text, text, budget=2000):
        # The turns of the people the query names, best matches first, go in front of what the
        # rest of read() found: the embedding or the overlap over everything often ranks other
        # people's turns that mention the name above the person's own words.
        names = self.named_speakers(query_text)
        if not names:
            return text
        picked = []
        for name in names:
            used = 0
            for turn in self.rank_by_overlap(query_text, self.by_speaker[name])[:20]:
                if used + len(turn) > budget // len(names):
                    continue
                picked.append(turn)
                used += len(turn) + 1
        shown = "\\n".join(picked)
        return (shown + "\\n\\n" + text)[:3000] if shown else text
'''),
    "bridge_evidence": (("re",), '''
    def bridge_evidence(self, query_text, text, budget=1500):
        # "What is the name of the brother of the person who ran the half marathon?": find who
        # that is first -- the speaker of the turn that best matches the clause -- then answer
        # from that person's other turns. The clause's own turn is left out, so the answer is
        # looked for in the second fact, not in the first.
        found = re.search(r"\\b(?:person|one|friend|someone|somebody|people) (?:who|that|whose) ([^?]+)",
                          query_text, re.I)
        if not found or not self.by_speaker:
            return text
        everyone = []
        for name in self.by_speaker:
            everyone.extend(self.by_speaker[name])
        first = self.rank_by_overlap(found.group(1), everyone)[:1]
        person = self.speaker_of(first[0]) if first else ""
        if person not in self.by_speaker:
            return text
        # The second hop looks for the question's words the first turn did not already use.
        seen = {word[:4] for word in re.findall(r"[a-z0-9]{3,}", first[0].lower())}
        rest = " ".join([word for word in re.findall(r"[a-z0-9]{3,}", query_text.lower()) if word[:4] not in seen])
        picked = []
        used = 0
        for turn in self.rank_by_stems(rest, self.by_speaker[person]):
            if turn != first[0] and used + len(turn) <= budget:
                picked.append(turn)
                used += len(turn) + 1
        return "\\n".join(picked) if picked else text
'''),
    "rank_by_stems": (("re", "math"), '''
    def rank_by_stems(self, query_text, texts):
        # Like rank_by_overlap, but words meet on their first four letters, so "grow up" finds
        # "growing up" and "engaged" finds "engagement"; rarer shared stems count more.
        stems = {word[:4] for word in re.findall(r"[a-z0-9]{3,}", query_text.lower())}
        bags = [{word[:4] for word in re.findall(r"[a-z0-9]{3,}", text.lower())} & stems for text in texts]
        doc_freq = {}
        for bag in bags:
            for stem in bag:
                doc_freq[stem] = doc_freq.get(stem, 0) + 1
        scored = []
        for i in range(len(texts)):
            overlap = 0.0
            for stem in bags[i]:
                overlap += math.log(1 + len(texts) / doc_freq[stem])
            scored.append((round(overlap, 6), -i))
        scored.sort(reverse=True)
        return [texts[-minus_i] for score, minus_i in scored]
'''),
    "date_key": (("re",), '''
    def date_key(self, text):
        # "[1:56 pm on 8 May, 2023] ..." -> 20230508; 0 when the text carries no date stamp.
        found = re.search(r"(\\d{1,2}) ([A-Za-z]{3})[a-z]*,? (\\d{4})", text[:60])
        if not found:
            return 0
        months = "janfebmaraprmayjunjulaugsepoctnovdec"
        month = months.find(found.group(2).lower()) // 3 + 1
        return int(found.group(3)) * 10000 + month * 100 + int(found.group(1))
'''),
    "rank_newest_first": (("math",), '''
    def rank_newest_first(self, query_text, texts):
        # The overlap ranking of rank_by_overlap, but a tie goes to the newest dated text (then
        # to the one stored last): facts change ("we moved house: I live in Bilbao now"), and the
        # latest statement is the one that holds now. Question words ("who", "now") are left
        # out: they decide nothing about the topic, yet would break the tie by chance.
        words = self.query_words(query_text) - {"who", "what", "when", "where", "which", "why", "how",
                                                "now", "the", "did", "does", "was", "were", "are",
                                                "has", "have", "had", "and", "for", "with", "that"}
        bags = [self.query_words(text) & words for text in texts]
        doc_freq = {}
        for bag in bags:
            for word in bag:
                doc_freq[word] = doc_freq.get(word, 0) + 1
        scored = []
        for i in range(len(texts)):
            overlap = 0.0
            for word in bags[i]:
                overlap += math.log(1 + len(texts) / doc_freq[word])
            scored.append((round(overlap, 6), self.date_key(texts[i]), i))
        scored.sort(reverse=True)
        return [texts[i] for score, day, i in scored]
'''),
    "spread_sessions": ((), '''
    def spread_sessions(self, texts, per_session=2):
        # At most per_session entries of one session come first, the rest after them: questions
        # that gather facts from several conversations need evidence from several sessions, not
        # five turns of the one that matches best.
        counts = {}
        first = []
        rest = []
        for text in texts:
            stamp = text[: text.index("]") + 1] if text.startswith("[") and "]" in text else ""
            counts[stamp] = counts.get(stamp, 0) + 1
            if stamp and counts[stamp] > per_session:
                rest.append(text)
            else:
                first.append(text)
        return first + rest
'''),
    "entity_queries": (("re",), '''
    def entity_queries(self, query_text):
        # One query per name the query mentions (capitalised words after the first), each the
        # name plus the query's other words; none when it names nobody.
        words = query_text.split()
        names = []
        for word in words[1:]:
            name = re.sub(r"[^\\w'-]", "", word)
            if name.endswith("'s"):
                name = name[:-2]
            if name[:1].isupper() and name not in names:
                names.append(name)
        rest = " ".join([w for w in words if re.sub(r"[^\\w'-]", "", w)[:1].islower()])
        return [name + " " + rest for name in names[:3]]
'''),
    "merge_results": ((), '''
    def merge_results(self, lists):
        # Interleave the hits of several queries, best first from each, without repeats.
        merged = []
        longest = 0
        for hits in lists:
            longest = len(hits) if len(hits) > longest else longest
        for rank in range(longest):
            for hits in lists:
                if rank < len(hits) and hits[rank] not in merged:
                    merged.append(hits[rank])
        return merged
'''),
    "drop_captions": (("re",), '''
    def drop_captions(self, raw_text):
        # "[shares a photo of a pie]", "[sends a picture of ...]": a description of an image,
        # not a statement; dropped so that the answerer quotes what people said.
        return re.sub(r"[ \\t]*\\[(?:shares|shared|sends|sent|posts|posted)\\b[^\\]\\n]*\\]", "", raw_text)
'''),
}

REACH_NEEDS: dict[str, tuple[str, ...]] = {
    "index_turns": ("speaker_of", "split_turns", "date_stamp"),
    "with_entity_evidence": ("named_speakers", "rank_by_overlap"),
    "bridge_evidence": ("speaker_of", "rank_by_overlap", "rank_by_stems"),
    "rank_newest_first": ("query_words", "date_key"),
}
