"""One typed, frozen description of an episode's options.

The environment, the episode, the experiment grid, policy training and every script's
command line are built from :class:`Settings`, so an option is declared, documented and
validated once. Defaults are the paper's protocol (``docs/method.md``, Protocol).
Names of priors, threshold searches, query strategies and rewards are checked against
their registries, so options registered by a user are accepted too.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from typing import Any, Literal

from ballad_env.cost import C_R_RULES, COST_METRICS
from ballad_env.detectors import DETECTORS
from ballad_env.detectors.ssdo.kernel import check_pairs
from ballad_env.detectors.ssdo.model import (
    ETA_SAMPLE_DEFAULT,
    EXACT_MAX_TRAIN,
    KERNEL_BACKENDS,
    KERNEL_DTYPES,
    LABEL_TERMS,
    SQUASH_FORMULAS,
    SQUASH_QUANTILES,
    TRAIN_SCORINGS,
    check_prior,
)
from ballad_env.protocol import BUDGET_RULES, SCALINGS, SPLITS, Budget
from ballad_env.queries import AL_QUERIES, LR_QUERIES, QUERY_RNGS
from ballad_env.rejection import REJECTORS, check_rejector_settings
from ballad_env.rejection.confidence import CALL_SEARCHES, TAU_POSITIONS
from ballad_env.rejection.rejex import DEFAULT_T
from ballad_env.rejection.two_sided import TIE_RULES
from ballad_env.rewards import COSINE_RULES, ENTROPY_LOGS, ENTROPY_TERMS, REWARD_SIGNALS
from ballad_env.settings.presets import (
    AUTHORS_ARITHMETIC,
    AUTHORS_CODE,
    AUTHORS_QUERY_SEED,
    SADAL_CODE,
)
from ballad_env.settings.values import (
    check_backend,
    cost_value,
    finite_number,
    named_options,
    number_text,
    query_seed_value,
    rejex_t_value,
    ssif_contamination_value,
    whole_number,
)

#: The built-in choices; each registry may hold more.
RewardName = Literal["entropy", "cosine", "cost", "round_cost", "val_cost", "val_sample_cost"]
PriorName = Literal["iforest", "knn"]
SearchName = Literal["exact", "bayes", "authors-bayes"]
ALQueryName = Literal["uncertainty", "uncertainty-argsort", "random"]
LRQueryName = Literal["random", "per-round"]
QueryRng = Literal["streams", "authors"]
KernelDType = Literal["float64", "float32"]
KernelBackend = Literal["numpy", "torch"]
KernelPairs = Literal["all", "near"]
CostMetric = Literal["per_example", "class_conditional"]
SplitName = Literal["stratified", "authors", "sadal"]
BudgetRule = Literal["paper", "sadal"]
Scaling = Literal["standard-minmax", "none"]
RejectionCostRule = Literal["gamma", "bound"]
TrainScores = Literal["fitted", "rescored"]
SquashQuantile = Literal["exact", "whole-percent"]
SquashFormula = Literal["expm1", "authors"]
LabelTerms = Literal["incremental", "authors"]
CosineRule = Literal["ours", "authors"]
TauWithoutVal = Literal["train-labels", "zero", "validation"]
TauPosition = Literal["as-found", "bottom", "middle", "top"]
EntropyLog = Literal["log2", "authors"]
InitialFit = Literal["train", "train-val"]
DetectorName = Literal["ssdo", "ssif"]
RejectorName = Literal["confidence", "two-sided", "rejex", "rejex-tuned"]
TwoSidedTie = Literal["fewest", "middle", "most"]
EntropyTerms = Literal["one", "binary"]
SSIFSeed = Literal["episode", "authors"]


def _option(default: Any, help: str, short: str | None = None, quiet: bool = False) -> Any:
    """A settings field: its default, one line of help, and its tag in setting names.

    ``quiet``: an option added after results were stored, which ``Settings.to_dict`` leaves
    out while it has its default, so the run.json and lattice headers of runs with the
    defaults stay what they were (and such runs can grow); names already leave defaults out.
    """
    return field(default=default, metadata={"help": help, "short": short, "quiet": quiet})


@named_options
@dataclass(frozen=True)
class Settings:
    """Everything an episode's outcome depends on besides the data set and the seed."""

    c_fp: float = _option(1.0, "cost of a false positive", "cfp")
    c_fn: float = _option(1.0, "cost of a false negative", "cfn")
    c_r: float | RejectionCostRule | None = _option(
        None, "cost of a rejection: a number, gamma (the contamination) or bound (min(c_fp "
        "(1 - gamma), c_fn gamma), SADAL's)", "cr")
    reward: RewardName = _option(
        "entropy", "reward of a step: entropy or cosine (the paper's signals), cost (decrease "
        "of the test cost; reads test labels), round_cost (minus the test cost after the "
        "step, so the return is minus the sum of per-round costs; reads test labels), "
        "val_cost (decrease of the cost estimated on bought labels) or val_sample_cost "
        "(decrease of the cost on the labeled validation examples only)")
    budget_fraction: float = _option(0.3, "label budget as a fraction of |D|", "budget")
    round_fraction: float = _option(0.02, "labels per round as a fraction of |D|", "round")
    threshold_search: SearchName = _option(
        "exact", "how tau is optimised: exact, bayes (gp_minimize, seeded by the state) or "
        "authors-bayes (the published code's gp_minimize: x0 at the 10% quantile, seed 331)")
    bayes_calls: int = _option(20, "evaluations of the bayes threshold searches")
    al_strategy: ALQueryName = _option(
        "uncertainty", "which training examples AL labels: uncertainty (random in the first "
        "round, then the least confident, ties at random), uncertainty-argsort (the published "
        "code: ties in np.argsort's order over the whole of D) or random", "al")
    lr_strategy: LRQueryName = _option(
        "random", "which validation examples LR labels: random (blocks of one random order "
        "of V, drawn at the start) or per-round (the published code: a fresh uniform sample "
        "of the unlabeled V every round)", "lr")
    query_rng: QueryRng = _option(
        "streams", "random source of the AL and LR queries: streams (each its own stream, "
        "so labels do not depend on the order of the rounds) or authors (the published "
        "code: one legacy RandomState, seeded by query_seed, shared by both in the order of "
        "the rounds; no lattice)", "qrng")
    query_seed: int | None = _option(
        None, "with query_rng=authors, the seed of the shared legacy RandomState: split (the "
        "episode's split seed) or a whole number (331: the published load_dataset's "
        "np.random.seed(331), whatever the split's random_state)", "qseed", quiet=True)
    k: int = _option(30, "SSDO: neighbour rank that sets the kernel width eta", "k")
    alpha: float = _option(2.3, "SSDO: weight of the labels against the prior", "alpha")
    prior: PriorName | Any = _option(
        "iforest", "SSDO's unsupervised prior: iforest (the paper), knn (the authors' code), "
        "another registered name or any pyod detector's name (ecod, copod, lof, hbos, ...; "
        "in Python also a pyod detector instance)")
    eta_sample: int | None = _option(
        None, "training points whose k-th-neighbour distance sets eta: 0 = all (exact), "
        f"N = a seeded random N; default: all up to {EXACT_MAX_TRAIN:,} training points, "
        f"else {ETA_SAMPLE_DEFAULT:,}", "eta")
    kernel_dtype: KernelDType | None = _option(
        None, "precision of the kernel sums: float64 (exact) or float32 (about 4x faster); "
        f"default: float64 up to {EXACT_MAX_TRAIN:,} training points, else float32", "kernel")
    kernel_backend: KernelBackend = _option(
        "numpy", "where the kernel sums and the sampled eta's neighbour search run: numpy, or "
        "torch (on a GPU when there is one: full-size data; the same sums within 1e-6 relative "
        "to 1 + da + dn; needs pip install -e '.[torch]' in the clone)", "backend", quiet=True)
    kernel_device: str | None = _option(
        None, "the torch backend's device: cpu, cuda, cuda:N, ... (default: cuda when torch "
        "sees a GPU, else cpu)", "device", quiet=True)
    kernel_pairs: KernelPairs | None = _option(
        None, "which (point, label) pairs the kernel sums visit: all, or near (only blocks of "
        "pairs whose weight exp does not round to 0: the same sums up to their order of "
        "summation: AL steps 7 to 15 times faster on donors and http; numpy backend only); "
        f"default: all up to {EXACT_MAX_TRAIN:,} training points or with torch, else near",
        "pairs", quiet=True)
    cost_metric: CostMetric = _option(
        "per_example", "the cost tau minimises and the test cost reports: per_example "
        "(c_fp FP + c_fn FN + c_r R) / n, what the paper's figures and code compute, or "
        "class_conditional c_r P(reject) + c_fp FPR + c_fn FNR, the paper's written formula",
        "metric")
    split: SplitName = _option(
        "stratified", "the data split: stratified 40/40/20 (ours), authors (the published "
        "BALLAD code: per class, train_test_split sets 60 percent aside, a third of it for T, "
        "random_state = the seed) or sadal (SADAL's: train_test_split stratified 80/20, then "
        "the 80 50/50 into D and V, random_state = the seed)", "split")
    scaling: Scaling = _option(
        "standard-minmax", "feature scaling: standard-minmax (standard then min-max, fitted "
        "on D; the paper) or none (the published SADAL code's raw features)", "scale",
        quiet=True)
    budget_rule: BudgetRule = _option(
        "paper", "how the budget is counted: paper (budget / round fraction rounds of "
        "round(round fraction |D|) labels) or sadal (int(budget fraction |D u V|) labels in "
        "all, int(total / rounds) a round)", "brule", quiet=True)
    prior_train_scores: TrainScores = _option(
        "fitted", "D's prior scores: fitted (pyod's decision_scores_; kNN leaves each point out) "
        "or rescored (decision_function on D, the published code: each point its own "
        "neighbour)", "trainscores")
    squash_quantile: SquashQuantile = _option(
        "exact", "squashing thresholds at the (1 - gamma) quantile: exact, or whole-percent "
        "(the published code's np.percentile at int((1 - gamma) * 100))", "squash")
    squash_formula: SquashFormula = _option(
        "expm1", "how the squashing 1 - 2^(-(s/t)^2) is evaluated: expm1 (-expm1(-ln 2 "
        "(s/t)^2), precise for small s) or authors (anomatools' 1 - exp(ln(0.5) (s/t)^2), the "
        "published code's; it differs in the last bit on some scores)", "squashf", quiet=True)
    label_terms: LabelTerms = _option(
        "incremental", "how SSDO's label terms are summed: incremental (kernel sums grown as "
        "labels arrive) or authors (anomatools': pairwise distances, summed over all labels in "
        "the order of D every round; the published code's last bits)", "lterms", quiet=True)
    tau_without_val: TauWithoutVal = _option(
        "train-labels", "tau while V has no label: train-labels (set on D's labels), zero "
        "(the published BALLAD code: reject nothing) or validation (two-sided rejector only; "
        "the published SADAL code: fitted on V without labels, the search stays at its "
        "start, and the next AL round's queries read those thresholds)", "tau0")
    tau_position: TauPosition = _option(
        "as-found", "where tau sits in its interval of equal cost: as-found (the search's "
        "result), bottom, middle or top", "taupos")
    entropy_log: EntropyLog = _option(
        "log2", "entropy reward's logarithm: log2 (the paper) or authors (the published code: "
        "natural log on the LR side and in the initial AL output)", "entropy")
    cosine_rule: CosineRule = _option(
        "ours", "the cosine signal: ours (AL over 0/1 predictions, LR over 0/1 rejections, "
        "both sides' initial outputs from the initial detector; a zero vector gives 0 or 1) or "
        "authors (the published code: AL over -1/+1 predictions, the LR side's initial output "
        "all zero, NaN where a vector is all zero, as scipy's cosine; ballad-cosine then starts "
        "from the published rewards, AL 0.99 and LR 1, and a NaN compares false)", "cos",
        quiet=True)
    initial_fit: InitialFit = _option(
        "train", "the detector of the initial outputs the first AL and LR rewards compare with: "
        "train (SSDO without labels on D, the detector of every round) or train-val (the "
        "published code: fitted on D and V together)", "init")
    detector: DetectorName = _option(
        "ssdo", "the anomaly detector: ssdo (BALLAD's, on the prior; the paper) or ssif "
        "(SADAL's semi-supervised isolation forest, refitted on D from one seed after every AL "
        "round; the SSDO options prior, k, alpha, eta, kernel, trainscores and squash do not "
        "apply) or another registered name (ballad_env.detectors.DETECTORS)", "det")
    ssif_trees: int = _option(100, "SSIF: trees in the forest (the published code's 100)",
                              "trees")
    ssif_seed: SSIFSeed = _option(
        "episode", "SSIF's random source: episode (one seed drawn from the episode's detector "
        "stream; every fit grows from it) or authors (a fresh RandomState(9) for every fit, as "
        "the published SADAL.py's SSIF())", "sseed", quiet=True)
    ssif_contamination: float | str = _option(
        "data", "SSIF's contamination (the share of training points with P >= 0.5): data (the "
        "data set's) or a number in (0, 1) (the published SADAL.py's SSIF(): 0.1)", "scont",
        quiet=True)
    rejector: RejectorName = _option(
        "confidence", "the rejector: confidence (BALLAD's one threshold tau on 2|P - 0.5|; "
        "the paper), two-sided (SADAL's left and right thresholds, reject iff left <= P <= "
        "right; threshold_search exact or authors-bayes), rejex (RejEx: reject iff ExCeeD's "
        "stability <= 1 - 2 exp(-rejex_T); no label read, so LR labels only estimate the "
        "cost), rejex-tuned (RejEx with T chosen on the labels that set the rejection) or "
        "another registered name (ballad_env.rejection.REJECTORS)", "rej", quiet=True)
    rejex_T: float = _option(
        DEFAULT_T, "RejEx's tolerance T (rejector rejex; rejex-tuned's before any label): reject "
        "iff the stability is at most 1 - 2 exp(-T)", "rejT", quiet=True)
    two_sided_tie: TwoSidedTie = _option(
        "fewest", "where the two-sided rejector's exact search lands among each side's "
        "thresholds of least cost: fewest (rejects fewest), middle or most (rejects most, "
        "within the at-most-half cap)", "tie", quiet=True)
    entropy_terms: EntropyTerms = _option(
        "one", "the entropy signal's entropy: one (BALLAD's -p log p) or binary (SADAL's "
        "-p log p - (1 - p) log(1 - p))", "hterms", quiet=True)

    def __post_init__(self) -> None:
        for name in ("budget_fraction", "round_fraction", "alpha"):
            self._set(name, finite_number(name, getattr(self, name)))
        if isinstance(self.c_r, str) and self.c_r.lower() in C_R_RULES:
            rule = self.c_r.lower()
            self._set("c_r", None if rule == "gamma" else rule)  # one setting for gamma
        for name in ("c_fp", "c_fn", "c_r"):
            value = getattr(self, name)
            if value is None or (name == "c_r" and value in C_R_RULES):
                continue
            self._set(name, cost_value(name, value))
        REWARD_SIGNALS.check(self.reward)
        AL_QUERIES.check(self.al_strategy)
        LR_QUERIES.check(self.lr_strategy)
        DETECTORS.check(self.detector)
        REJECTORS.check(self.rejector)
        if isinstance(self.prior, str):
            self._set("prior", self.prior.lower())
        check_prior(self.prior)
        for name, choices in FIXED_CHOICES.items():
            if getattr(self, name) not in choices:
                raise ValueError(f"unknown {name} {getattr(self, name)!r}: use one of "
                                 f"{', '.join(choices)}")
        self._set("rejex_T", rejex_t_value(self.rejex_T, self.rejector, DEFAULT_T))
        check_rejector_settings(self)
        if self.threshold_search not in CALL_SEARCHES or self.rejector == "two-sided":
            self._set("bayes_calls", 20)  # unused: one setting, whatever was passed
        self._set("bayes_calls", whole_number("bayes_calls", self.bayes_calls, 2))
        self._set("k", whole_number("k", self.k, 1))
        self._check_ssif()
        if self.eta_sample is not None:
            self._set("eta_sample", whole_number("eta_sample", self.eta_sample, 0))
        if self.kernel_dtype is not None and self.kernel_dtype not in KERNEL_DTYPES:
            raise ValueError(f"unknown kernel_dtype {self.kernel_dtype!r}: use one of "
                             f"{', '.join(KERNEL_DTYPES)} (or None: by the training set's size)")
        check_backend(self.kernel_backend, self.kernel_device)
        if self.kernel_pairs is not None:
            check_pairs(self.kernel_pairs, self.kernel_backend)
        if self.alpha <= 0:
            raise ValueError(f"alpha must be positive, got {self.alpha}")
        self._set("query_seed", query_seed_value(self.query_seed, self.query_rng))
        Budget.from_fractions(1, self.budget_fraction, self.round_fraction)  # validates both
        Budget.warn_if_inexact(self.budget_fraction, self.round_fraction)

    def _check_ssif(self) -> None:
        """SSIF's options (unused, so at their defaults, with another detector)."""
        self._set("ssif_trees", whole_number("ssif_trees", self.ssif_trees, 1))
        self._set("ssif_contamination", ssif_contamination_value(self.ssif_contamination))
        if self.detector != "ssif":  # unused: one setting, whatever was passed
            for name in ("ssif_trees", "ssif_seed", "ssif_contamination"):
                self._set(name, getattr(Settings, name))

    def _set(self, name: str, value: Any) -> None:
        object.__setattr__(self, name, value)

    # ----------------------------------------------------------------- derived
    @property
    def name(self) -> str:
        """A stable short id: the prior, then every option that differs from the default
        (``sadal`` for the SADAL preset's options, ``<prior>_authors`` for BALLAD's)."""
        default = Settings()
        prior = self.prior if isinstance(self.prior, str) else type(self.prior).__name__.lower()
        sadal = self.is_sadal_code
        preset = SADAL_CODE if sadal else AUTHORS_CODE if self.is_authors_code else {}
        parts = [prior] if not sadal else ["sadal"] if prior == default.prior else ["sadal", prior]
        if self.is_authors_code:
            parts.append("authors")
        if self.reward != default.reward:
            parts.append(self.reward)
        if self.threshold_search != default.threshold_search and "threshold_search" not in preset:
            parts.append(f"{self.threshold_search}{self.bayes_calls}")
        for f in fields(self):
            if f.name in preset:
                continue
            short = f.metadata["short"]
            value = getattr(self, f.name)
            if short and value != getattr(default, f.name):
                parts.append(f"{short}{number_text(value)}" if isinstance(value, float | int)
                             else f"{short}-{value}")
        return "_".join(parts)

    @property
    def is_authors_code(self) -> bool:
        """Whether every option of the published code's variant (``AUTHORS_CODE``) is on."""
        return all(getattr(self, name) == value for name, value in AUTHORS_CODE.items())

    @classmethod
    def authors_code(cls, **changes: Any) -> Settings:
        """The published code's variant (``AUTHORS_CODE``): its kNN prior, its threshold
        search (``authors-bayes``, 50 calls), its query stream's seed (331, named
        ``qseed331``; with ``query_rng="streams"`` in ``changes`` there is no such stream)
        and its arithmetic (``AUTHORS_ARITHMETIC``: the squashing and SSDO's label terms as
        anomatools computes them, the published cosine signal; named ``squashf-authors``,
        ``lterms-authors``, ``cos-authors``) too;
        ``changes`` override any option."""
        values: dict[str, Any] = {"prior": "knn", "threshold_search": "authors-bayes",
                                  "bayes_calls": 50, **AUTHORS_CODE, **AUTHORS_ARITHMETIC,
                                  **changes}
        if values["query_rng"] == "authors":  # its seed goes with its stream
            values.setdefault("query_seed", AUTHORS_QUERY_SEED)
        return cls(**values)

    @classmethod
    def sadal(cls, **changes: Any) -> Settings:
        """The published SADAL code's behaviour (``SADAL_CODE``; ``docs/sadal.md``), with the
        evident fixes where it crashes; ``changes`` override any option. Play it with the
        ``sadal`` agent (or force a side: All-in-AL, All-in-LR)."""
        return cls(**{**SADAL_CODE, **changes})

    @property
    def is_sadal_code(self) -> bool:
        """Whether every option of the published SADAL code (``SADAL_CODE``) is on."""
        return all(getattr(self, name) == value for name, value in SADAL_CODE.items())

    def query_seed_for(self, split_seed: int) -> int:
        """The seed of ``query_rng="authors"``'s legacy stream in an episode whose split
        seed is ``split_seed``."""
        return split_seed if self.query_seed is None else self.query_seed

    def eta_sample_for(self, n_train: int) -> int:
        """The eta sample in force on a training set of ``n_train`` points (0: all of them)."""
        if self.eta_sample is not None:
            return self.eta_sample
        return 0 if n_train <= EXACT_MAX_TRAIN else ETA_SAMPLE_DEFAULT

    def kernel_dtype_for(self, n_train: int) -> str:
        """The kernel precision in force on a training set of ``n_train`` points."""
        if self.kernel_dtype is not None:
            return self.kernel_dtype
        return "float64" if n_train <= EXACT_MAX_TRAIN else "float32"

    def kernel_pairs_for(self, n_train: int) -> str:
        """The kernel pairs in force on a training set of ``n_train`` points."""
        if self.kernel_pairs is not None:
            return self.kernel_pairs
        return "near" if n_train > EXACT_MAX_TRAIN and self.kernel_backend == "numpy" else "all"

    def budget(self, n_train: int, n_val: int) -> Budget:
        """The budget on a training set of ``n_train`` and a validation set of ``n_val``
        examples, counted by ``budget_rule``."""
        return Budget.for_rule(self.budget_rule, n_train, n_val, self.budget_fraction,
                               self.round_fraction)

    @property
    def n_rounds(self) -> int:
        """Rounds in an episode (the budget rule; it does not depend on |D|)."""
        return Budget.from_fractions(1, self.budget_fraction, self.round_fraction).n_rounds

    def replace(self, **changes: Any) -> Settings:
        """A copy with some options changed (validated again)."""
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        """The options and the name, as JSON values (a prior given as an object cannot be);
        quiet options (``_option``) only when they differ from their default."""
        if not isinstance(self.prior, str):
            raise ValueError("settings with a prior object cannot be saved: register the prior "
                             "by name (ballad_env.detectors.ssdo.model.PRIORS) to record it")
        default = Settings()
        return {"name": self.name, **{
            f.name: getattr(self, f.name) for f in fields(self)
            if not (f.metadata["quiet"] and getattr(self, f.name) == getattr(default, f.name))}}

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> Settings:
        """Inverse of :meth:`to_dict`; unknown keys (the name) are ignored, missing ones default."""
        return cls(**{f.name: values[f.name] for f in fields(cls) if f.name in values})

    @classmethod
    def grid(cls, base: Settings | None = None, **options: Sequence[Any]) -> tuple[Settings, ...]:
        """Every combination of the option values given, the others from ``base``:
        ``Settings.grid(prior=["iforest", "knn"], c_fp=[1, 10])`` gives four settings."""
        combos: list[dict[str, Any]] = [{}]
        for name, values in options.items():
            combos = [{**combo, name: value} for combo in combos for value in values]
        base = base or cls()
        return tuple(dict.fromkeys(base.replace(**combo) for combo in combos))


#: Options with a fixed set of values (the others' values come from registries).
FIXED_CHOICES: dict[str, tuple[str, ...]] = {
    "cost_metric": COST_METRICS, "split": SPLITS, "budget_rule": BUDGET_RULES,
    "scaling": SCALINGS,
    "prior_train_scores": TRAIN_SCORINGS,
    "squash_quantile": SQUASH_QUANTILES, "squash_formula": SQUASH_FORMULAS,
    "label_terms": LABEL_TERMS,
    "cosine_rule": COSINE_RULES, "tau_without_val": ("train-labels", "zero", "validation"),
    "tau_position": TAU_POSITIONS, "entropy_log": ENTROPY_LOGS,
    "initial_fit": ("train", "train-val"), "query_rng": QUERY_RNGS,
    "entropy_terms": ENTROPY_TERMS,
    "kernel_backend": KERNEL_BACKENDS, "ssif_seed": ("episode", "authors"),
    "two_sided_tie": TIE_RULES}


__all__ = ["AUTHORS_ARITHMETIC", "AUTHORS_CODE", "AUTHORS_QUERY_SEED", "FIXED_CHOICES",
           "SADAL_CODE", "Settings"]
