"""SSIF, SADAL's semi-supervised isolation forest: the forest, its trees grown in lockstep,
its split criterion and its adapter to an episode."""
