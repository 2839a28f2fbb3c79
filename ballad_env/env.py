"""The label-budget allocation problem of BALLAD as a Gymnasium environment."""

from __future__ import annotations

import os
import warnings
from collections.abc import Sequence
from dataclasses import fields
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from ballad_env.data import Dataset, DataWarning, load_dataset
from ballad_env.episode import Episode, Snapshot, check_settings
from ballad_env.observation import check_version, encode, observation_space
from ballad_env.rewards import REWARD_SIGNALS, SIDE_SIGNAL_NAMES, CostSignal, SideSignal
from ballad_env.settings import Settings

#: The warning ``check_settings`` gives at construction, which each reset would repeat.
_NO_TEST_ANOMALY = r".*the test set gets no anomaly"

DatasetSource = str | os.PathLike | Dataset | tuple[np.ndarray, np.ndarray]
#: Keys ``reset(options=...)`` accepts, in the live and the replay environment alike:
#: ``"dataset"``, a name or names among the environment's data sets (any case), and
#: ``"seed"``, the episode's seed or seeds to draw from (a lattice's seed in the replay).
RESET_OPTIONS = ("dataset", "seed")


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
    ``Box(0, 1, (18,), float32)``, built from the episode's snapshot by
    ``ballad_env.observation``; the names are ``OBSERVATION_FEATURES`` (also
    ``env.feature_names``; ``observation.feature_table()`` prints them with their meaning):

    | index | name | meaning |
    |---|---|---|
    | 0-3 | entropy_al, entropy_lr, cosine_al, cosine_lr | latest rewards per side (NaN as 1) |
    | 4-5 | al_measured, lr_measured | whether each side has a reward yet |
    | 6 | budget_used | rounds taken / rounds in the budget |
    | 7-8 | labeled_train, labeled_val | labeled fractions of D and V |
    | 9 | anomalies_found | anomalies labeled / (gamma x the size of D and V), clipped to 1 |
    | 10 | contamination | gamma |
    | 11-13 | tau, val_rejection, val_cost | threshold, share of V rejected, scaled cost estimate |
    | 14-15 | prev_al, prev_lr | the previous action, one-hot (both 0 at the start) |
    | 16-17 | al_available, lr_available | the action mask |

    ``observation="v1"`` (``gymnasium.make(ENV_ID, observation="v1")``) appends two features,
    ``Box(0, 1, (20,))`` (``observation.feature_table("v1")``):

    | index | name | meaning |
    |---|---|---|
    | 0-17 | as v0 | |
    | 18 | val_sample_cost | the cost on labeled V examples (uniform), over the top unit cost |
    | 19 | val_sample_se | its standard error, over the largest unit cost |

    ``observation="v2"`` appends 13 more to v1, ``Box(0, 1, (33,))``: the unit costs, the
    budget and label-free traits of the data and the detector (size, dimension, gamma, the
    start detector's flagged share and confidence, how far AL moved it), each scaled to a
    range that means the same on every data set (``observation.feature_table("v2")``).

    ## Rewards
    A signal of ``ballad_env.rewards.REWARD_SIGNALS`` (``docs/method.md``, Rewards): the
    chosen side's change signal, ``reward="entropy"`` (default) or ``"cosine"``; for
    learning policies ``"cost"``, the decrease of the test cost over the round (it reads
    test labels, so it is for learning in simulation only; the return is the final cost's
    decrease), ``"round_cost"``, minus the test cost after the round (test labels too; the
    return is minus the sum of the per-round costs), ``"val_cost"``, the
    decrease of the cost estimated on the labeled examples that set tau (only labels the
    agent paid for), and ``"val_sample_cost"``, the decrease of the cost on the labeled
    validation examples only (a uniform sample of V, so the AL queries do not bias it; 0
    before any V label). ``info`` always reports the test cost. Under the published
    cosine (``cosine_rule="authors"``, in ``Settings.authors_code()``) a cosine reward is NaN
    where a vector is all zero (always the first LR round's), as in the published code.

    ## Info
    ``reset`` and ``step`` return the same keys (``agents.RECORD_FIELDS`` and two arrays):

    - ``dataset``, ``round``, ``action``: data set name, rounds taken, ``"AL"``/``"LR"``
      (``""`` at reset);
    - ``test_cost``: cost per test example of the detector with rejection (the metric in
      force); ``test_cost_per_example``, ``test_cost_class_conditional``: the test cost
      under each metric;
    - ``fpr``, ``fnr``, ``rejection_rate``, ``auc``: on T, false positive and negative rates
      among the accepted examples, share rejected, ROC AUC of the scores;
    - ``reward_al``, ``reward_lr``: each side's latest shown signal (the ``reward``
      setting's side signal; entropy for a cost reward); ``entropy_al``, ``entropy_lr``,
      ``cosine_al``, ``cosine_lr``: each side's latest side signals; ``al_measured``,
      ``lr_measured``: whether each side has been played;
    - ``tau``, ``val_cost``: the rejection threshold and the validation cost that set it;
      ``threshold_left``, ``threshold_right``: the rejection band's ends in P (the
      two-sided rejector's thresholds, or 0.5 -/+ tau / 2, tau being the band's width);
    - ``rejex_expected_rejection``, ``rejex_rejection_bound``, ``rejex_cost_bound``:
      RejEx's (``rejector="rejex"``/``"rejex-tuned"``) expected test rejection rate, its
      bound on that rate (holding with probability 0.95) and on the expected cost per test
      example; -1 for other rejectors. RejEx reads no label: with ``"rejex"`` the labels an
      LR round buys set nothing and only estimate the cost (``val_cost``,
      ``val_sample_cost``);
    - ``n_labeled_train``, ``n_labeled_val``, ``n_anomalies_found``: labels bought in D and
      V, anomalies among them;
    - ``queried``: indices (into D for AL, V for LR) the round just labeled;
    - ``action_mask``: boolean (AL, LR), which actions remain (also ``action_masks()``).

    ## Starting State
    ``reset(seed=s)`` draws the split, the prior and the query orders from ``s``: a new
    seed is a new repetition of the paper's protocol. No labels; tau = 0. Given a list
    of data sets, each reset first draws one of them (``info["dataset"]``; two ``(X, y)``
    in one list are ``arrays-0``, ``arrays-1``, ...). ``reset(options={"dataset": name,
    "seed": s})`` plays that data set (or draws among several names) with episode seed ``s``
    (or draws among several), as the replay environment does; other keys are refused.

    ## Episode End
    Terminated when the budget is spent (15 rounds by default). Never truncated.
    Stepping afterwards raises ``RuntimeError``.

    ## Arguments
    | argument | default | meaning |
    |---|---|---|
    | dataset | ``"toy"`` | a name, a path, ``(X, y)``, a ``Dataset`` or a list (below) |
    | data_dir | ``None`` | folder of data files; else ``$BALLAD_DATA_DIR`` |
    | settings | ``Settings()`` | every episode option at once (``ballad_env.Settings``) |
    | render_mode | ``None`` | ``"rgb_array"`` (data and rounds) or ``"ansi"`` (one line) |
    | observation | ``"v0"`` | observation version: ``"v0"`` (above), ``"v1"`` or ``"v2"`` |
    | any ``Settings`` field | from ``settings`` | overrides it, e.g. ``c_fn=10``, ``prior="knn"`` |

    ``dataset`` is a name (``toy``, ``wdbc``, one of the paper's 18 such as
    ``"Cardiotocography"``, ``"adbench/cover"``, or a file stem in ``data_dir``), a path,
    ``(X, y)``, a ``Dataset``, or a list of these: one is drawn per episode.

    ## Example
    >>> import gymnasium as gym
    >>> import ballad_env
    >>> env = gym.make(ballad_env.ENV_ID, dataset="toy", prior="knn")
    >>> obs, info = env.reset(seed=0)
    >>> obs.shape, obs.dtype, env.action_space
    ((18,), dtype('float32'), Discrete(2))
    >>> env.unwrapped.action_masks()  # both pools hold a round of labels
    array([ True,  True])
    >>> obs, reward, terminated, truncated, info = env.step(1)  # LR: label validation
    >>> info["round"], info["action"], terminated, truncated
    (1, 'LR', False, False)

    ## Version History
    * v0: initial version.
    * v0 with ``observation="v1"``: the observation appends ``val_sample_cost`` and
      ``val_sample_se``; the episode, rewards and ``info`` are unchanged (an argument, not
      a new id, so that gymnasium does not call v0 out of date).
    * v0 with ``observation="v2"``: v1's observation and 13 features of the costs, the budget,
      the data and the detector; the episode, rewards and ``info`` are unchanged.
    """

    metadata = {"render_modes": ["rgb_array", "ansi"], "render_fps": 2}

    def __init__(
        self,
        dataset: DatasetSource | list[DatasetSource] = "toy",
        *,
        data_dir: str | os.PathLike | None = None,
        settings: Settings | None = None,
        render_mode: str | None = None,
        observation: str = "v0",
        **options: Any,
    ) -> None:
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"unknown render_mode {render_mode!r}: use one of "
                             f"{self.metadata['render_modes']}")
        unknown = sorted(set(options) - {f.name for f in fields(Settings)})
        if unknown:
            options_list = ", ".join(f.name for f in fields(Settings))
            raise TypeError(f"unknown option(s) {', '.join(unknown)}: use data_dir, settings, "
                            f"render_mode, observation or a Settings field ({options_list})")
        self.settings = (settings or Settings()).replace(**options)
        sources = dataset if isinstance(dataset, list) else [dataset]
        if not sources:
            raise ValueError("dataset: the list of data sets is empty")
        self.datasets = [load_dataset(source, data_dir=data_dir)
                         for source in named_arrays(sources)]
        self.dataset = self.datasets[0]
        self.reward_signal = REWARD_SIGNALS[self.settings.reward]
        self._shown = shown_signal(self.settings)
        self.render_mode = render_mode
        self.action_space = spaces.Discrete(2)
        self.episode: Episode | None = None
        self._snapshot: Snapshot | None = None
        self._history: list[Snapshot] = []  # this episode's snapshots, for render()
        self.use_observation(observation)
        # Fail now, not at the first reset, on costs or budgets the data cannot support;
        # warn now (a test set without anomalies), and not again at every reset.
        for data in self.datasets:
            check_settings(data, self.settings)

    @property
    def reward_name(self) -> str:
        """The reward this environment gives (``settings.reward``)."""
        return self.settings.reward

    # ----------------------------------------------------------------- Gymnasium API
    def reset(self, *, seed: int | None = None,
              options: dict[str, Any] | None = None) -> tuple[np.ndarray, dict[str, Any]]:
        """Start a new repetition: new split, prior and query orders from ``seed``;
        ``options`` (``RESET_OPTIONS``) choose the data set and the episode's seed."""
        options = check_reset_options(options)
        super().reset(seed=seed)
        datasets = self.datasets
        if options.get("dataset") is not None:
            datasets = self._named(options["dataset"])
            self.dataset = datasets[0]
        if len(datasets) > 1:
            self.dataset = datasets[int(self.np_random.integers(len(datasets)))]
        if options.get("seed") is not None:
            seeds = episode_seeds(options["seed"])
            seed = seeds[int(self.np_random.integers(len(seeds)))] if len(seeds) > 1 \
                else seeds[0]
        elif seed is None or len(self.datasets) > 1:
            seed = int(self.np_random.integers(2**63 - 1))
        with warnings.catch_warnings():  # given once, when the environment was made
            warnings.filterwarnings("ignore", _NO_TEST_ANOMALY, DataWarning)
            self.episode = Episode(self.dataset, seed, self.settings)
        self._snapshot = self.episode.snapshot()
        self._history = [self._snapshot]
        return encode(self._snapshot, self.observation_version), self._snapshot.info(self._shown)

    def step(self, action: int) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        """Spend one round of labels on AL (0) or LR (1)."""
        if self.episode is None or self._snapshot is None:
            raise RuntimeError("call reset() before step()")
        action = self._as_action(action)
        before = self._snapshot
        self.episode.step(action)
        self._snapshot = after = self.episode.snapshot()
        self._history.append(after)
        reward = step_reward(self.reward_signal, before, after)
        return (encode(after, self.observation_version), reward, bool(self.episode.done), False,
                after.info(self._shown))

    def snapshot(self) -> Snapshot:
        """The current state as a frozen record (observation and ``info`` derive from it)."""
        if self._snapshot is None:
            raise RuntimeError("call reset() before snapshot()")
        return self._snapshot

    def use_observation(self, version: str) -> None:
        """Observe in ``version`` (``"v0"``, ``"v1"``, ``"v2"``) from now on (the episode is not
        touched; ``encode(env.snapshot(), version)`` is the current observation in it)."""
        #: Feature names of the observation, in order.
        self.feature_names = check_version(version)
        self.observation_version = version
        self.observation_space = observation_space(version)

    def action_masks(self) -> np.ndarray:
        """Valid actions (AL, LR) now, for sb3-contrib's MaskablePPO."""
        if self.episode is None:
            return np.ones(2, dtype=bool)
        return self.episode.action_mask()

    def render(self) -> np.ndarray | str | None:
        """A picture (``"rgb_array"``: the data with the detector's probabilities, labels,
        rejections and queries, and cost, tau and labels by round) or a line of text
        (``"ansi"``)."""
        if self.render_mode is None or self.episode is None:
            return None
        from ballad_env import render

        if self.render_mode == "ansi":
            return render.ansi(self.snapshot())
        return render.rgb_array(self.episode, self._history)

    # ----------------------------------------------------------------- hooks
    def _as_action(self, action: Any) -> int:
        return as_action(action)

    def _named(self, names: str | list[str] | tuple[str, ...]) -> list[Dataset]:
        """This environment's data sets of ``names`` (any case); an error listing them."""
        wanted = [names] if isinstance(names, str) else list(names)
        held = {d.name.lower(): d for d in self.datasets}
        missing = [n for n in wanted if str(n).lower() not in held]
        if missing or not wanted:
            raise ValueError(f"reset option dataset: no data set {', '.join(map(repr, missing))}"
                             f" in this environment; it holds "
                             f"{', '.join(d.name for d in self.datasets)}")
        return [held[str(n).lower()] for n in dict.fromkeys(wanted)]


def check_reset_options(options: dict[str, Any] | None) -> dict[str, Any]:
    """``options`` of a ``reset`` (``{}`` for ``None``); a ``ValueError`` listing the keys
    accepted (``RESET_OPTIONS``) for any other, so a typo never plays a default episode."""
    if options is None:
        return {}
    if not isinstance(options, dict):
        raise TypeError(f"reset options must be a dict with keys {', '.join(RESET_OPTIONS)}; "
                        f"got {type(options).__name__}")
    unknown = sorted(map(str, set(options) - set(RESET_OPTIONS)))
    if unknown:
        raise ValueError(f"unknown reset option(s) {', '.join(unknown)}: use "
                         f"{', '.join(RESET_OPTIONS)}")
    return options


def episode_seeds(seeds: Any) -> list[int]:
    """The seeds of the reset option ``seed`` (one or several non-negative integers)."""
    values = np.atleast_1d(np.asarray(seeds))
    if values.size == 0 or values.dtype.kind not in "iu" or (values < 0).any():
        raise ValueError(f"reset option seed: give a non-negative integer or a list of them, "
                         f"not {seeds!r}")
    return sorted({int(v) for v in values})


def named_arrays(sources: Sequence[Any]) -> list[Any]:
    """``sources`` of data with their ``(X, y)`` tuples checked and named apart: complex
    values are refused (numpy would drop the imaginary part with only a warning), and
    several tuples in one list become ``Dataset`` s named ``arrays-0``, ``arrays-1``, ... in
    their order (a tuple alone loads as ``arrays``), so that ``info``, results and stores
    tell them apart. Other sources are returned as they are."""
    for source in sources:
        if isinstance(source, tuple) and len(source) == 2 and \
                any(np.iscomplexobj(np.asarray(part)) for part in source):
            raise ValueError("dataset: X and y must be real numbers; got complex values "
                             "(take np.real or np.abs, or make the two parts two features)")
    tuples = [i for i, source in enumerate(sources)
              if isinstance(source, tuple) and len(source) == 2]
    named = list(sources)
    if len(tuples) > 1:
        for number, index in enumerate(tuples):
            X, y = sources[index]
            named[index] = Dataset(f"arrays-{number}", np.asarray(X), np.asarray(y))
    return named


def as_action(action: Any) -> int:
    """Validate an action from any integer-like type; name the problem if it is invalid."""
    if type(action) is int and (action == 0 or action == 1):  # the common case, fast
        return action
    try:
        value = int(np.asarray(action).item())
    except (TypeError, ValueError) as err:
        raise ValueError(f"invalid action {action!r}: use 0 (AL) or 1 (LR)") from err
    if value not in (0, 1) or np.asarray(action).item() != value:
        raise ValueError(f"invalid action {action!r}: use 0 (AL) or 1 (LR)")
    return value


def shown_signal(settings: Settings) -> str:
    """The side signal ``info["reward_al"/"reward_lr"]`` report: the reward if it is a side
    signal, else the first one."""
    return settings.reward if settings.reward in SIDE_SIGNAL_NAMES else SIDE_SIGNAL_NAMES[0]


def step_reward(signal: SideSignal | CostSignal, before: Snapshot, after: Snapshot) -> float:
    """The reward of the step from ``before`` to ``after``: a cost signal of the two
    snapshots, or the side signal the round just measured (its side's latest value)."""
    if isinstance(signal, CostSignal):
        return signal(before, after)
    if after.previous is None:
        raise ValueError("no round was taken between the two snapshots")
    return float(after.signal(after.previous, signal.name))
