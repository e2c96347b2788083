"""Baseline memory programs: the systems the M* paper compares against (Table 1) and the ones our
seed documents describe (ACE, GraphMemory, SelfMem), each written as a plain memory program in the
contract. Like `seeds/`, the engine reads their *source* (never imports them): `mstar baselines`
scores them side by side and `mstar evolve --seeds` can start an evolution run from any of them.
Vector Search is the seed `seeds/vector_search.py` and is not repeated here."""
