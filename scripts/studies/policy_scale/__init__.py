"""The policy-scale study: policies trained on the replay store at scale (``study``);
``python -m scripts.studies.policy_scale``."""
