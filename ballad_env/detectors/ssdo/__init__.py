"""SSDO (Vercruyssen et al.), BALLAD's detector: the model on an unsupervised prior, its
kernel sums (exact, float32, near pairs, torch) and its adapter to an episode."""
