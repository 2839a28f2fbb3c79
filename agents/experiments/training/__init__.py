"""Policy training: stable-baselines3 on the live or replay environment, the environments a
run steps, the adapter to the native vector env, and trained runs as the harness keeps them."""
