"""Episodes computed once and replayed: the lattice of every state of an episode, which
action is better where, lattice files and stores, transition tables, and the replay
environment (single and vectorised) that steps them."""
