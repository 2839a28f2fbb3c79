"""PPO itself, apart from the harness that runs it: what a reader compares with CleanRL's
``ppo.py`` or LeanRL's compiled PPO.

Every tensor is (T, N) or (T x N, ...): a rollout step is one forward pass of all N
environments, an update a few minibatches of thousands of rows. The loss is
stable-baselines3's PPO loss term for term (MaskablePPO's with action masks), on SB3's own
``MlpPolicy``. Read in this order:

- ``core``: the rollout's tensors (``Rollout``), generalised advantage estimation
  (``gae``), the network's forward pass (``network``, with its ``tanh``), the minibatches
  of an update (``over_minibatches``), the autograd step with torch's Adam
  (``ppo_update``: ``--trainer batched``), and the hyperparameters all of them read
  (``Hyperparameters``, a protocol the training configuration's block satisfies);
- ``updates``: the same step as one function over one flat parameter vector, its gradient
  written out by hand and Adam by hand (``ppo_step``, ``FlatUpdate``: ``--trainer
  compiled``);
- ``step_cache``: that step compiled ahead of time (``torch.export``, AOTInductor) once per
  machine into the user's cache folder, and loaded from there;
- ``split_step`` and ``exchange``: the split schedule's step, each of two processes
  computing half of every minibatch's gradient (``half_gradient``), the halves swapped
  through shared memory (``Exchange``) and applied in the same order by both
  (``apply_halves``).

The harness (``agents.experiments.training``) builds the model, plays the environments,
schedules rollouts and updates over one or two processes, and records the run; it imports
this package, which imports nothing of it (``tests/test_architecture.py``).
"""
