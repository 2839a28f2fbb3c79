"""The label-budget allocation problem of BALLAD as a Gymnasium environment."""

from __future__ import annotations

import os
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from ballad_env.data import Dataset, load_dataset
from ballad_env.episode import (
    ACTION_NAMES,
    AL,
    LR,
    Episode,
    EpisodeConfig,
    RoundResult,
    check_settings,
)
from ballad_env.rewards import REWARDS

#: Observation features, in order; every one lies in [0, 1] whatever the data set.
OBSERVATION_FEATURES = (
    "entropy_al",        # latest AL entropy reward (0 until measured)
    "entropy_lr",        # latest LR entropy reward
    "cosine_al",         # latest AL cosine reward
    "cosine_lr",         # latest LR cosine reward
    "al_measured",       # 1 once an AL round has been taken
    "lr_measured",       # 1 once an LR round has been taken
    "budget_used",       # rounds taken / rounds in the budget
    "labeled_train",     # labeled fraction of D
    "labeled_val",       # labeled fraction of V
    "anomalies_found",   # anomalies labeled / expected anomalies in D and V (clipped to 1)
    "contamination",     # gamma, the known fraction of anomalies
    "tau",               # current rejection threshold
    "val_rejection",     # share of V rejected by tau
    "val_cost",          # cost estimate on the labels that set tau, over the largest unit cost
    "prev_al",           # previous action was AL
    "prev_lr",           # previous action was LR
    "al_available",      # D still holds a whole round of unlabeled examples
    "lr_available",      # V still holds a whole round of unlabeled examples
)
FEATURE_INDEX = {name: i for i, name in enumerate(OBSERVATION_FEATURES)}
#: The paper's signals, then two for learning: the decrease of the test cost (reads test
#: labels: simulation only) and of the cost estimated on the labels bought so far.
REWARD_CHOICES = (*REWARDS, "cost", "val_cost")
#: The features fixed by the state (i AL rounds, j LR rounds), whatever the path to it.
STATE_FEATURES = ("budget_used", "labeled_train", "labeled_val", "anomalies_found",
                  "contamination", "tau", "val_rejection", "val_cost", "al_available",
                  "lr_available")


def state_features(episode: Episode) -> dict[str, float]:
    """The observation features that depend only on the episode's state, scaled to [0, 1]."""
    n_train, n_val = episode.train_labels.size, episode.val_labels.size
    expected_anomalies = max(1.0, episode.gamma * (n_train + n_val))
    mask = episode.action_mask()
    return {
        "budget_used": episode.rounds_done / episode.budget.n_rounds,
        "labeled_train": episode.train_labels.count / n_train,
        "labeled_val": episode.val_labels.count / n_val,
        "anomalies_found": min(1.0, episode.anomalies_found() / expected_anomalies),
        "contamination": episode.gamma,
        "tau": episode.tau,
        "val_rejection": episode.validation_rejection_rate(),
        "val_cost": min(1.0, episode.validation_cost() / episode.costs.max_cost),
        "al_available": float(mask[AL]), "lr_available": float(mask[LR]),
    }


def encode_observation(state: dict[str, float], latest: dict[int, dict[str, float] | None],
                       previous: int | None) -> np.ndarray:
    """The observation vector: state features plus the path's part, each side's latest
    rewards (None until measured) and the previous action (None at the start)."""
    values = dict(state)
    for side, suffix in ((AL, "al"), (LR, "lr")):
        rewards = latest[side]
        values[f"{suffix}_measured"] = rewards is not None
        for signal in REWARDS:
            values[f"{signal}_{suffix}"] = rewards[signal] if rewards is not None else 0.0
    values["prev_al"], values["prev_lr"] = previous == AL, previous == LR
    obs = np.array([values[name] for name in OBSERVATION_FEATURES], dtype=np.float32)
    return np.clip(obs, 0.0, 1.0)


DatasetSource = str | os.PathLike | Dataset | tuple[np.ndarray, np.ndarray]


class BudgetAllocationEnv(gym.Env):
    """BALLAD: spend a label budget on Active Learning (AL) or Learning to Reject (LR).

    ## Description
    An anomaly detector (SSDO on an unsupervised pyod prior) is trained on a set D and
    given a reject option whose threshold tau is set on a validation set V. Each round
    buys b labels: AL labels the b most uncertain examples of D and retrains the
    detector; LR labels b random examples of V and re-optimises tau. The detector with
    rejection is scored on a test set T by its cost per example. Perini, Giannuzzi and
    Davis, "How to Allocate your Label Budget? Choosing between Active Learning and
    Learning to Reject in Anomaly Detection", AAAI-23 UDM workshop.

    ## Action Space
    ``Discrete(2)``: ``AL = 0`` (label training examples), ``LR = 1`` (label validation
    examples). ``action_masks()`` tells which pools still hold a round of labels.

    ## Observation Space
    ``Box(0, 1, (18,), float32)``; the names are ``OBSERVATION_FEATURES`` (also
    ``env.feature_names``):

    | index | name | meaning |
    |---|---|---|
    | 0-3 | entropy_al, entropy_lr, cosine_al, cosine_lr | each side's latest rewards |
    | 4-5 | al_measured, lr_measured | whether each side has a reward yet |
    | 6 | budget_used | rounds taken / rounds in the budget |
    | 7-8 | labeled_train, labeled_val | labeled fractions of D and V |
    | 9 | anomalies_found | anomalies labeled / gamma (|D| + |V|), clipped to 1 |
    | 10 | contamination | gamma |
    | 11-13 | tau, val_rejection, val_cost | threshold, share of V rejected, scaled cost estimate |
    | 14-15 | prev_al, prev_lr | the previous action, one-hot (both 0 at the start) |
    | 16-17 | al_available, lr_available | the action mask |

    ## Rewards
    The chosen side's change signal (SPEC §4): ``reward="entropy"`` (default) or
    ``"cosine"``. For learning policies: ``"cost"``, the decrease of the test cost over
    the round (it reads test labels, so it is for learning in simulation only), and
    ``"val_cost"``, the decrease of the cost estimated on the labeled examples that set
    tau (only labels the agent paid for). ``info`` always reports the test cost.

    ## Starting State
    ``reset(seed=s)`` draws the split, the prior and the query orders from ``s``: a new
    seed is a new repetition of the paper's protocol. No labels; tau = 0. Given a list
    of data sets, each reset first draws one of them (``info["dataset"]``).

    ## Episode End
    Terminated when the budget is spent (15 rounds by default). Never truncated.
    Stepping afterwards raises ``RuntimeError``.

    ## Arguments
    | argument | default | meaning |
    |---|---|---|
    | dataset | ``"toy"`` | a name (built-in or file stem), a path, ``(X, y)``, a ``Dataset``, |
    | | | or a list of these: one is drawn per episode |
    | data_dir | ``None`` | folder of data files; else ``$BALLAD_DATA_DIR`` |
    | reward | ``"entropy"`` | ``"entropy"``, ``"cosine"``, ``"cost"`` or ``"val_cost"`` |
    | budget_fraction, round_fraction | 0.3, 0.02 | budget and round size, fractions of D |
    | c_fp, c_fn, c_r | 1, 1, gamma | costs; must satisfy the cost inequality |
    | prior | ``"iforest"`` | ``"iforest"``, ``"knn"`` or a pyod detector |
    | threshold_search | ``"exact"`` | ``"exact"`` or ``"bayes"`` (gp_minimize) |
    | bayes_calls | 20 | evaluations of the bayes search |
    | al_strategy | ``"uncertainty"`` | ``"uncertainty"`` or ``"random"`` |
    | render_mode | ``None`` | ``"rgb_array"`` (2-D data) or ``"ansi"`` |

    ## Version History
    * v0: initial version.
    """

    metadata = {"render_modes": ["rgb_array", "ansi"], "render_fps": 2}

    def __init__(
        self,
        dataset: DatasetSource | list[DatasetSource] = "toy",
        *,
        data_dir: str | os.PathLike | None = None,
        reward: str = "entropy",
        budget_fraction: float = 0.3,
        round_fraction: float = 0.02,
        c_fp: float = 1.0,
        c_fn: float = 1.0,
        c_r: float | None = None,
        prior: str | Any = "iforest",
        threshold_search: str = "exact",
        bayes_calls: int = 20,
        al_strategy: str = "uncertainty",
        render_mode: str | None = None,
    ) -> None:
        if reward not in REWARD_CHOICES:
            raise ValueError(f"unknown reward {reward!r}: use one of {REWARD_CHOICES}")
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"unknown render_mode {render_mode!r}: use one of "
                             f"{self.metadata['render_modes']}")
        sources = dataset if isinstance(dataset, list) else [dataset]
        if not sources:
            raise ValueError("dataset: the list of data sets is empty")
        self.datasets = [load_dataset(source, data_dir=data_dir) for source in sources]
        self.dataset = self.datasets[0]
        self.reward_name = reward
        # The side signal reported as info["reward_al"/"reward_lr"].
        self._signal = reward if reward in REWARDS else "entropy"
        self.config = EpisodeConfig(
            budget_fraction=budget_fraction, round_fraction=round_fraction, c_fp=c_fp,
            c_fn=c_fn, c_r=c_r, prior=prior, threshold_search=threshold_search,
            bayes_calls=bayes_calls, al_strategy=al_strategy)
        self.render_mode = render_mode
        self.action_space = spaces.Discrete(2)
        n = len(OBSERVATION_FEATURES)
        self.observation_space = spaces.Box(np.zeros(n, np.float32), np.ones(n, np.float32),
                                            dtype=np.float32)
        self.feature_names = OBSERVATION_FEATURES
        self.episode: Episode | None = None
        self._last: RoundResult | None = None
        # Fail now, not at the first reset, on costs or budgets the data cannot support.
        for data in self.datasets:
            check_settings(data, self.config)

    # ----------------------------------------------------------------- Gymnasium API
    def reset(self, *, seed: int | None = None,
              options: dict[str, Any] | None = None) -> tuple[np.ndarray, dict[str, Any]]:
        """Start a new repetition: new split, prior and query orders from ``seed``."""
        super().reset(seed=seed)
        if len(self.datasets) > 1:
            self.dataset = self.datasets[int(self.np_random.integers(len(self.datasets)))]
        if seed is None or len(self.datasets) > 1:
            seed = int(self.np_random.integers(2**63 - 1))
        self.episode = Episode(self.dataset, seed, self.config)
        self._last = None
        return self._observation(), self._info()

    def step(self, action: int) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        """Spend one round of labels on AL (0) or LR (1)."""
        if self.episode is None:
            raise RuntimeError("call reset() before step()")
        action = self._as_action(action)
        before = self._costs_now()
        self._last = self.episode.step(action)
        reward = self._reward(before)
        return self._observation(), reward, bool(self.episode.done), False, self._info()

    def action_masks(self) -> np.ndarray:
        """Valid actions (AL, LR) now, for sb3-contrib's MaskablePPO."""
        if self.episode is None:
            return np.ones(2, dtype=bool)
        return self.episode.action_mask()

    def render(self) -> np.ndarray | str | None:
        """A heat map of the detector (``"rgb_array"``, 2-D data) or a text summary (``"ansi"``)."""
        if self.render_mode is None or self.episode is None:
            return None
        from ballad_env import render

        if self.render_mode == "ansi":
            return render.ansi(self.episode, self._info())
        return render.rgb_array(self.episode)

    # ----------------------------------------------------------------- hooks
    def _as_action(self, action: Any) -> int:
        """Validate an action from any integer-like type; name the problem if it is invalid."""
        try:
            value = int(np.asarray(action).item())
        except (TypeError, ValueError) as err:
            raise ValueError(f"invalid action {action!r}: use 0 (AL) or 1 (LR)") from err
        if not self.action_space.contains(value) or np.asarray(action).item() != value:
            raise ValueError(f"invalid action {action!r}: use 0 (AL) or 1 (LR)")
        return value

    def _costs_now(self) -> dict[str, float]:
        """The costs a cost-decrease reward compares across a round."""
        if self.reward_name == "cost":
            return {"cost": self.episode.evaluate_test().cost}
        if self.reward_name == "val_cost":
            return {"val_cost": self.episode.validation_cost()}
        return {}

    def _reward(self, before: dict[str, float]) -> float:
        """The chosen side's signal, or the decrease of the chosen cost over the round."""
        if self.reward_name in REWARDS:
            return float(self._last.rewards[self.reward_name])
        after = self._costs_now()
        return float(before[self.reward_name] - after[self.reward_name])

    def _latest_rewards(self) -> dict[int, dict[str, float]]:
        """Each side's latest rewards; 0 until measured (the ``*_measured`` flags tell)."""
        return {side: self.episode.latest[side] or {"entropy": 0.0, "cosine": 0.0}
                for side in (AL, LR)}

    def _observation(self) -> np.ndarray:
        previous = self._last.action if self._last is not None else None
        return encode_observation(state_features(self.episode), self.episode.latest, previous)

    def _info(self) -> dict[str, Any]:
        ep = self.episode
        last = self._last
        test = ep.evaluate_test()
        latest = self._latest_rewards()
        return {
            "dataset": ep.dataset.name,
            "round": ep.rounds_done,
            "action": ACTION_NAMES[last.action] if last else "",
            "test_cost": test.cost, "fpr": test.fpr, "fnr": test.fnr,
            "rejection_rate": test.rejection_rate, "auc": test.auc,
            "reward_al": latest[AL][self._signal], "reward_lr": latest[LR][self._signal],
            "entropy_al": latest[AL]["entropy"], "entropy_lr": latest[LR]["entropy"],
            "cosine_al": latest[AL]["cosine"], "cosine_lr": latest[LR]["cosine"],
            "al_measured": ep.latest[AL] is not None, "lr_measured": ep.latest[LR] is not None,
            "tau": ep.tau,
            "val_cost": ep.validation_cost(),
            "n_labeled_train": ep.train_labels.count, "n_labeled_val": ep.val_labels.count,
            "n_anomalies_found": ep.anomalies_found(),
            "queried": last.queried.copy() if last else np.empty(0, dtype=np.intp),
            "action_mask": ep.action_mask(),
        }
