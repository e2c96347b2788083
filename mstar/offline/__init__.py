"""The offline backend's models: deterministic, LLM-free stand-ins for every role, so that
everything runs on a fresh machine without a key. A test double: it imitates the roles, it is
not where memory programs are engineered.

  act_memory.py             What the offline act policy learns from retrieved memory: goals,
                            places and procedures
  act_policy.py             Offline task agent for <task>act</task> prompts: one admissible
                            command per step, no LLM
  answer_list.py            List answers for the offline answerer: every matching item, when
                            told to list them
  answer_span.py            Short extractive answers for the offline answerer: a contiguous span
                            of memory, no LLM
  cases.py                  A case as the offline reflectors read it, and the two patterns they
                            and the answerer share
  gepa_proposer.py          Offline stand-in for GEPA's reflection LM: answers GEPA's
                            instruction-proposal prompt
  instruction_mutations.py  Instruction rewrites for the offline reflector (the "prompt
                            optimisation" half of M*)
  judge_model.py            Offline rubric judge: grades one rubric criterion against the last
                            assistant turn, LLM-free
  knob_mutations.py         Numeric-knob mutations: top-k, over-fetch, chunk size, character
                            caps, ranking weight
  mutation_types.py         Records shared by the offline reflector's mutation catalogue and its
                            model
  mutations.py              The offline reflector's mutation catalogue: small, readable edits of
                            memory programs
  paper_forms.py            The offline models read the paper-worded prompts (mstar.prompts
                            "paper") by turning them into the tagged prompts of the project's
                            own wording, which they already understand
  question_kinds.py         What a question asks for, read without an LLM: its answer type, head
                            noun and content words
  reach_helpers.py          Helper methods for the offline reflector's "reach" edits
                            (mstar/offline/reach_mutations.py)
  reach_mutations.py        Edits that let the offline reflector reach past retrieval knobs and
                            dates (issue 18)
  reflector_model.py        Offline reflector: a deterministic, LLM-free stand-in for the
                            reflector role
  repairs.py                Compile-fix rules of the offline reflector (paper Appendix G.3,
                            without an LLM)
  signals.py                Failure signals: what the offline reflector reads off one
                            underperforming case
  source_edits.py           Small, pure edits on memory-program source, located through the AST
  task_model.py             Offline task agent: answers the three task-agent prompts of
                            mstar.agent without an LLM
  text.py                   Text helpers shared by the offline (LLM-free) models
  toolkit_model.py          Offline toolkit model: answers `toolkit.llm_completion` calls of
                            memory programs, LLM-free
"""
