"""The search's *drafts* without a model: cbr's general solutions for the task's kind of data, as cases
the structural adapter fits to the task like any other (untrusted/general_*.py). Each kind of data gets
learners that learn differently, so that the search's ensemble has members that err differently, not only
tuned copies of one model: a table the same features learnt by LightGBM and by XGBoost (whose binning, leaf
sizes and regularisation differ), then by a forest of randomised trees, or for a table with free text by a
linear model over its words, characters, category levels and scaled numbers; text a linear model over word
and character n-grams, then for classes naive Bayes over word n-grams and for numbers LightGBM over word
n-grams."""

from __future__ import annotations

import ast
import re
from dataclasses import replace
from importlib import resources

from dsagent_cbr.bank.cases import Case
from dsagent_cbr.python_syntax import parse as parse_python
from dsagent_cbr.tasks.model import Task
from dsagent_cbr.tasks.table_facts import free_text_in, labelled_rows

GENERAL = "general"  # the case name rows and reports show for the first draft; the others add their learner
_CLASSIFIER = {
    "lgb.LGBMRegressor(": "lgb.LGBMClassifier(",
    "xgb.XGBRegressor(": "xgb.XGBClassifier(",
    "Ridge(alpha=1.0)": "LogisticRegression(C=4.0, max_iter=3000)",
    "import Ridge": "import LogisticRegression",
    "ExtraTreesRegressor": "ExtraTreesClassifier",
    "CatBoostRegressor": "CatBoostClassifier",
}
_MODALITIES = ("tabular", "text")
# metrics the trees stop early on as they are: both keep the squared loss, which learns faster (on
# hotel-rates LightGBM's absolute loss had not converged after 5,000 rounds, and XGBoost's stopped at a
# selection MAE of 10.08 against 8.65), and stop when the absolute error stops falling
_ABSOLUTE = {"mae", "medae"}
_STOP_ON_ABSOLUTE = {
    "lgb.LGBM": ("metric=None", 'metric="l1"'),
    "xgb.XGB": ("eval_metric=None", 'eval_metric="mae"'),
    "CatBoost": ("eval_metric=None", 'eval_metric="MAE"'),
}

_LIGHTGBM = '''    model = lgb.LGBMRegressor(n_estimators=5000, learning_rate=0.05, num_leaves=31, min_child_samples=20,
                              subsample=0.8, subsample_freq=1, colsample_bytree=0.8, reg_lambda=1.0, random_state=0,
                              verbose=-1, n_jobs=THREADS, metric=None)
    model.fit(design(X_train, spec), y_train, eval_set=[(design(X_valid, spec), y_valid)],
              callbacks=[lgb.early_stopping(200, verbose=False)])
'''
# A large table's first draft must grade within seconds, so that even a short budget ends with a
# submission: few rounds at a high learning rate over coarser bins (on diamonds-cut's 43,000 rows the full
# draft reached its deadline in a 30-second budget after 590 rounds and was killed while predicting), and
# on a table of many rows a sample of them; its refit learns every row (the bootstrap says when it refits)
QUICK_ROWS = 20_000
QUICK_SAMPLE = 200_000
# The quick, deep and forest drafts take every category as its integer codes, where the first draft and the
# floor split on a category of up to CODES_ABOVE levels as LightGBM's own. Which a table prefers differs:
# flights-late's 105 destinations learnt better as codes, a hotel table's 94-154 agents as categories
# (docs/decisions/category-codes.md, large-tables.md). So the drafts learn them both ways, and selection
# decides. On flights-late the quick draft's refit scored test AUROC 0.7872 with codes against 0.7808 with
# categories; on crash-severity, diamonds-cut and military-gender (categories of few levels) they were level.
_CODES = ("CODES_ABOVE = 200", "CODES_ABOVE = -1  # every category as its integer codes (search/drafts.py)")
_QUICK = f'''    # a first fit in seconds on a table of many rows: a sample of them; the refit (CBR_FIT=refit) learns all
    if len(X_train) > {QUICK_SAMPLE} and os.environ.get("CBR_FIT") != "refit":
        keep = np.sort(np.random.default_rng(0).choice(len(X_train), {QUICK_SAMPLE}, replace=False))
        X_train, y_train = (v.iloc[keep] if hasattr(v, "iloc") else v[keep] for v in (X_train, y_train))
    model = lgb.LGBMRegressor(n_estimators=300, learning_rate=0.2, num_leaves=31, min_child_samples=20,
                              subsample=0.8, subsample_freq=1, colsample_bytree=0.8, reg_lambda=1.0, max_bin=63,
                              random_state=0, verbose=-1, n_jobs=THREADS, metric=None)
    model.fit(design(X_train, spec), y_train, eval_set=[(design(X_valid, spec), y_valid)],
              callbacks=[lgb.early_stopping(20, verbose=False)])
'''
# A table of many rows gets LightGBM of 255 leaves too (AutoGluon's portfolio holds a large-leaved LightGBM
# beside its default one). Some tables need it: on an 80/20 split of nycflights13's flights (is a flight late,
# from its date, times, carrier and route), 255 leaves scored AUROC 0.7981 in 24 s where 31 leaves scored
# 0.7908 in 103 s, and XGBoost's loss-guided leaves did the same (0.7981 and 0.7915). Elsewhere 31 leaves did
# as well or better (a 640,000-row synthetic table 0.8283 against 0.8265, a 905,000-row table of five
# categories 0.6625 against 0.6623), so it is drafted after the two boosters: before the 31-leaf one, it took 75 s
# of a 3-minute run on the synthetic table and the submission fell from 0.8299 to 0.8264. It takes every
# category as its codes (_CODES): on flights-late its refit scored test AUROC 0.8019 with codes against
# 0.7954 with categories, on military-gender 0.66208 against 0.66210. docs/decisions/large-tables.md
DEEP_ROWS = 100_000
DEEP = "deep"
_DEEP = _LIGHTGBM.replace("num_leaves=31,", "num_leaves=255,")
# ... unless the 31-leaf LightGBM kept this many of its 5,000 rounds: still learning after so many, it
# wants larger trees, and the deep draft goes next. On flights it kept 3,414 rounds in 75 s, where 255 leaves
# scored better in 22 s; on the synthetic table it kept 1,587 (docs/decisions/large-tables.md)
DEEP_SIGNAL = 2500
# ... or the quick draft, before it, kept this many of its 300 rounds at a learning rate of 0.2: still
# learning after most of them at four times the first draft's pace, it asks sooner, and the deep draft
# takes the 31-leaf one's place (after the floor). In 18 runs on flights-late the quick draft kept 224
# to 300 rounds (300 in 7); on the synthetic tables of 1M and 5M rows, where 31 leaves did better, 132
# and 133; on military-gender 27 (docs/decisions/large-tables.md).
QUICK = "quick"
QUICK_CASE = f"{GENERAL}-{QUICK}"
QUICK_SIGNAL = 200
# ... and the XGBoost draft still to come grows as many leaves, with every category as its codes: on an 80/20
# split of flights-late's training rows (one core) 255 leaves scored AUROC 0.8001 in 14 s where 31 leaves
# scored 0.7876 in 76 s (0.7959 in 20 s with categories). Where the signal stays silent, as on
# military-gender, it keeps 31 leaves.
DEEP_XGBOOST = "deep-xgboost"
_XGBOOST_LEAVES = ("max_leaves=31,", "max_leaves=255,")
# The floor: LightGBM as it comes, every setting its default, no early stopping. It is what a data scientist
# runs first ("two lines of LightGBM"); as a node its selection score shows where the search stands against
# it, and selection picks it over anything worse, a blend too (loop.py's submitted_choice). Its refit is
# that default fitted on every labelled row.
FLOOR = "default"
FLOOR_CASE = f"{GENERAL}-{FLOOR}"  # the case name its node carries
_DEFAULT = '''    model = lgb.LGBMRegressor(random_state=0, verbose=-1, n_jobs=THREADS)
    model.fit(design(X_train, spec), y_train)
'''
# XGBoost grows its trees leaf by leaf, as FLAML's space does: on three seeded splits of the training rows
# of seven tables, 31 loss-guided leaves beat depth-6 trees on five (hotel-rates' MAE by 0.14, deliveries-
# time's MedAE by 0.024) and lost on two (mlc-churn's AUROC by 0.005, smoke-ban's accuracy by 0.0005)
_XGBOOST = '''    model = xgb.XGBRegressor(n_estimators=5000, learning_rate=0.05, grow_policy="lossguide", max_leaves=31,
                             max_depth=0, min_child_weight=1.0, subsample=0.8, colsample_bytree=0.8,
                             reg_lambda=1.0, tree_method="hist", enable_categorical=True, max_cat_to_onehot=1,
                             early_stopping_rounds=200, random_state=0, n_jobs=THREADS, eval_metric=None)
    model.fit(design(X_train, spec), y_train, eval_set=[(design(X_valid, spec), y_valid)], verbose=False)
'''
_TEXT_FEATURES = '''    vectorizers = [TfidfVectorizer(ngram_range=(1, 2), min_df=2, max_features=100000, sublinear_tf=True),
                   TfidfVectorizer(analyzer="char_wb", ngram_range=(2, 5), min_df=3, max_features=100000,
                                   sublinear_tf=True)]
'''
_TEXT_LINEAR = '''    model = Ridge(alpha=1.0)
    model.fit(features(vectorizers, X_train), y_train)
'''
# trees over word n-grams only: they learn slowly from the many character n-grams
_TEXT_WORDS = '''    vectorizers = [TfidfVectorizer(ngram_range=(1, 2), min_df=2, max_features=20000, sublinear_tf=True)]
'''
_TEXT_TREES = '''    model = lgb.LGBMRegressor(n_estimators=2000, learning_rate=0.05, num_leaves=31, min_child_samples=10,
                              subsample=0.8, subsample_freq=1, colsample_bytree=0.5, random_state=0, verbose=-1,
                              n_jobs=int(os.environ.get("OMP_NUM_THREADS") or 0) or None)
    model.fit(features(vectorizers, X_train), y_train, eval_set=[(features(vectorizers, X_valid), y_valid)],
              callbacks=[lgb.early_stopping(50, verbose=False)])
'''
# Complement naive Bayes (Rennie et al., 2003) learns from each word's weight in the other classes: on three
# seeded splits of the training rows of five text classification tasks (docs/decisions/text-second-draft.md)
# it took 0.1-1.6 s where LightGBM took 0.4-17.6 s, and a half-and-half blend with the first draft beat that
# draft's blend with LightGBM on four (fine-foods-rating's AUROC 0.869 against 0.860, rotten-tomatoes'
# accuracy 0.790 against 0.768) and was 0.003 below it on the fifth (debates). It predicts classes only: a
# regression keeps the trees.
_TEXT_BAYES = '''    model = ComplementNB(alpha=0.3)
    model.fit(features(vectorizers, X_train), y_train)
'''
# A table with free text: trees split on a few of its many words, where a linear model weighs them all
# (on debates' training rows, a statement and the debate it was said in, ...). The functions below take
# the place of the first draft's own, which build the trees' table.
_LINEAR_FUNCTIONS = '''
def learn(X):
    """What the matrix needs from the training rows: each column's kind, the numbers' centre and scale,
    each category's levels, and word and character TF-IDF for each free-text column."""
    kinds = column_kinds(X)
    table = numbers(X, kinds)
    categories = {c: sorted(X[c].dropna().astype(str).unique()) for c, k in kinds.items() if k == "category"}
    texts = {c: [TfidfVectorizer(ngram_range=(1, 2), min_df=2, max_features=50000, sublinear_tf=True),
                 TfidfVectorizer(analyzer="char_wb", ngram_range=(2, 5), min_df=3, max_features=50000,
                                 sublinear_tf=True)]
             for c, k in kinds.items() if k == "text"}
    for column, vectorizers in texts.items():
        for vectorizer in vectorizers:
            vectorizer.fit(X[column].fillna("").astype(str))
    return {"kinds": kinds, "categories": categories, "texts": texts,
            "centre": table.mean(), "scale": table.std().replace(0.0, 1.0).fillna(1.0)}


def numbers(X, kinds):
    """The number and date columns as floats, dates as their parts."""
    table = pd.DataFrame(index=X.index)
    for column, kind in kinds.items():
        if kind in ("number", "date"):
            for name, values in as_numbers(X, column, kind).items():
                table[name] = values
    return table


def design(X, spec):
    """The sparse matrix the model learns from: numbers scaled and clipped (a missing one at the centre,
    with a flag), one column per category level (an unseen level in none), and the text's TF-IDF."""
    table = numbers(X, spec["kinds"])
    scaled = ((table - spec["centre"]) / spec["scale"]).clip(-5.0, 5.0)
    parts = [sparse.csr_matrix(scaled.fillna(0.0).to_numpy(dtype=float)),
             sparse.csr_matrix(table.isna().to_numpy(dtype=float))]
    for column, known in spec["categories"].items():
        codes = pd.Categorical(X[column].astype(str).where(X[column].notna()), categories=known).codes
        rows = np.flatnonzero(codes >= 0)
        ones = np.ones(len(rows))
        parts.append(sparse.csr_matrix((ones, (rows, codes[rows])), shape=(len(X), len(known))))
    for column, vectorizers in spec["texts"].items():
        parts += [vectorizer.transform(X[column].fillna("").astype(str)) for vectorizer in vectorizers]
    return sparse.hstack(parts, format="csr")
'''
_LINEAR = '''    model = Ridge(alpha=1.0)
    model.fit(design(X_train, spec), y_train)
'''
# A forest of extremely randomised trees (Geurts et al., 2006) errs unlike the boosters, which makes it a
# blend's member: on two seeded splits of the training rows of eleven tables without free text, adding it
# to their cross-fitted blend made it better on 6 (hotel-rates' MAE by 0.051, pbc-status' log loss by 0.014),
# worse on 3 (deliveries-time's MedAE by 0.015) and left 2 as they were, where the linear model made 3
# better and 3 worse (docs/decisions/forest-draft.md). It takes numbers only, and stops adding trees at
# the deadline the harness gives for training, as the boosters stop adding rounds.
_FOREST = '''    # trees are added 25 at a time, up to 300, and none once the harness's deadline for training has
    # passed (CBR_DEADLINE, seconds since the epoch): a forest cut short still predicts
    deadline, step = float(os.environ.get("CBR_DEADLINE") or 0) or None, 25
    model = ExtraTreesRegressor(n_estimators=step, min_samples_leaf=2, max_features=0.7, n_jobs=THREADS,
                                random_state=0, warm_start=True)
    table = design(X_train, spec)
    model.fit(table, y_train)
    while model.n_estimators < 300 and (deadline is None or time.time() < deadline):
        model.n_estimators += step
        model.fit(table, y_train)
'''
# CatBoost (Prokhorenkova et al., 2018) encodes each category by ordered target statistics and grows
# symmetric trees: a learner FLAML's and AutoGluon's portfolios hold and cbr's drafts lacked. On two seeded
# 80/20 splits of the training rows, against the LightGBM draft: credit's AUROC 0.874 and 0.849 against
# 0.861 and 0.839, crash-severity's log loss 1.254 and 1.249 against 1.255 and 1.254 (ten times slower),
# doctor-visits' RMSE level; the half-and-half blend of the two beat either on four of six splits. A table
# of many rows leaves it out: its time grows with rows and classes. At a learning rate of 0.1 it stopped
# early at 141 trees on mlc-churn (selection AUROC 0.932, LightGBM's 0.927) and ran to 3,000 on hotel-rates
# (85 s on one core): 1,000 at most. Its refit (CBR_FIT=refit) trains the first fit's early-stopped trees on
# every row, as the bootstrap has LightGBM and XGBoost do.
CATBOOST_ROWS = 50_000
EXTRAS = ("forest", "catboost")  # drafted for the blend's variety: the boosters lead
_CATBOOST = '''    table, categories = text_categories(design(X_train, spec))
    refit = os.environ.get("CBR_FIT") == "refit" and FIRST_TREES
    model = CatBoostRegressor(iterations=FIRST_TREES[0] if refit else 1000, learning_rate=0.1, depth=6,
                              random_seed=0, thread_count=THREADS or -1, verbose=0, allow_writing_files=False,
                              eval_metric=None)
    if refit:  # the validation rows are learnt too: nothing is left to stop on
        model.fit(table, y_train, cat_features=categories, callbacks=[Deadline()])
    else:
        valid = text_categories(design(X_valid, spec))[0]
        model.fit(table, y_train, cat_features=categories, eval_set=(valid, y_valid), early_stopping_rounds=200,
                  use_best_model=True, callbacks=[Deadline()])
        FIRST_TREES.append(model.tree_count_)
'''
_CATBOOST_FUNCTIONS = '''
FIRST_TREES = []  # the first fit's trees once early stopping chose them: the refit trains as many


class Deadline:
    """Stops CatBoost once the harness's deadline for training has passed (CBR_DEADLINE, seconds since
    the epoch), keeping the trees so far, as the boosters' rounds are kept."""

    def after_iteration(self, info):
        deadline = float(os.environ.get("CBR_DEADLINE") or 0)
        return not deadline or time.time() < deadline


def text_categories(table):
    """The table with its categories as text, a missing one as "missing", as CatBoost takes them."""
    categories = [c for c in table.columns if isinstance(table[c].dtype, pd.CategoricalDtype)]
    for column in categories:
        table[column] = table[column].astype(object).where(table[column].notna(), "missing").astype(str)
    return table, categories
'''
_TEXT_WORDS_ALL = _TEXT_WORDS.replace("max_features=20000", "max_features=100000")
# learner name -> the text edits that turn the first draft into it
_VARIANTS: dict[str, dict[str, list[tuple[str, str]]]] = {
    "tabular": {
        QUICK: [_CODES, (_LIGHTGBM, _QUICK)],
        DEEP: [_CODES, (_LIGHTGBM, _DEEP)],
        "": [],
        FLOOR: [
            (
                "    # early stopping decides the rounds; a patience of 200 lets a slow learner (many small gains) go on\n",
                "",
            ),
            (_LIGHTGBM, _DEFAULT),
        ],
        "xgboost": [("import lightgbm as lgb", "import xgboost as xgb"), (_LIGHTGBM, _XGBOOST)],
        "forest": [
            (
                "a table: gradient boosting over every column",
                "a table: a forest of randomised trees over every column",
            ),
            ("import os\n", "import os\nimport time\n"),
            ("import lightgbm as lgb\n", ""),
            (
                "from sklearn.feature_extraction.text import TfidfVectorizer\n",
                "from sklearn.ensemble import ExtraTreesRegressor\n"
                "from sklearn.feature_extraction.text import TfidfVectorizer\n",
            ),
            _CODES,  # the forest takes numbers
            (
                "    # early stopping decides the rounds; a patience of 200 lets a slow learner (many small gains) go on\n",
                "",
            ),
            (_LIGHTGBM, _FOREST),
        ],
        "catboost": [
            ("import os\n", "import os\nimport time\n"),
            ("import lightgbm as lgb\n", "from catboost import CatBoostRegressor\n"),
            (
                "    # early stopping decides the rounds; a patience of 200 lets a slow learner (many small gains) go on\n",
                "",
            ),
            (_LIGHTGBM, _CATBOOST),
            ("\n\ndef train_model(", f"{_CATBOOST_FUNCTIONS}\n\ndef train_model("),
            (
                'predict(design(X, model["spec"]))',
                'predict(text_categories(design(X, model["spec"]))[0])',
            ),
        ],
        "linear": [
            (
                "a table: gradient boosting over every column",
                "a table: a linear model over every column",
            ),
            ("import lightgbm as lgb\n", ""),
            (
                "from sklearn.feature_extraction.text import TfidfVectorizer\n",
                "from sklearn.feature_extraction.text import TfidfVectorizer\nfrom sklearn.linear_model import Ridge\n",
            ),
            (_LIGHTGBM, _LINEAR),
        ],
    },
    "text": {
        "": [],
        "lightgbm": [
            ("from sklearn.linear_model import Ridge", "import os\n\nimport lightgbm as lgb"),
            (_TEXT_FEATURES, _TEXT_WORDS),
            (_TEXT_LINEAR, _TEXT_TREES),
        ],
        "naive-bayes": [
            (
                "from sklearn.linear_model import Ridge",
                "from sklearn.naive_bayes import ComplementNB",
            ),
            (_TEXT_FEATURES, _TEXT_WORDS_ALL),
            (_TEXT_LINEAR, _TEXT_BAYES),
        ],
    },
}
# learner -> functions that replace the first draft's own
_FUNCTIONS = {"linear": _LINEAR_FUNCTIONS}


def general_cases(task: Task) -> list[Case]:
    """The general solutions for the task as solution cases, in the order the search drafts them; none
    for kinds of data they do not cover."""
    if task.modality not in _MODALITIES:
        return []
    base = (
        resources.files("dsagent_cbr.untrusted")
        .joinpath(f"general_{task.modality}.py")
        .read_text(encoding="utf-8")
    )
    # a multi-label task is learnt one label at a time (the adapter fits one model per label column)
    task_type = (
        "binary-classification" if task.task_type == "multilabel-classification" else task.task_type
    )
    cases = []
    for learner in _learners(task):
        edited = _edited(base, _VARIANTS[task.modality][learner])
        script = _fitted(_with_functions(edited, _FUNCTIONS.get(learner, "")), task)
        # boosted trees learn one target: the adapter then fits one model per target column
        metric = (
            "rmse"
            if task.metric_name == "mcrmse" and ("lgb." in script or "xgb." in script)
            else task.metric_name
        )
        cases.append(
            Case(
                kind="solution",
                text=f"cbr's general {task.modality} solution {learner}".rstrip(),
                task_name=f"{GENERAL}-{learner}" if learner else GENERAL,
                source_kind="cbr",
                modality=task.modality,
                task_type=task_type,
                script=script,
                metric=metric,
            )
        )
    return cases


def text_table_drafts(task: Task) -> list[Case]:
    """cbr's linear draft for a table with free text, none for another: deploy's adapter tries it
    before past solutions, which a table's text reaches as integer codes of its categories."""
    return [case for case in general_cases(task) if case.task_name == f"{GENERAL}-linear"]


def deep_next(
    cases: list[Case], picked: int, rounds: list[int | None], quick: bool = False
) -> list[Case] | None:
    """The drafts with the deep one next, after the first `picked` (and the floor, if still to come), when
    the 31-leaf draft's boosters kept DEEP_SIGNAL rounds or more, or the `quick` draft's QUICK_SIGNAL
    (`rounds`, as its run wrote them down: None for one that ran all its rounds), and the XGBoost draft
    deepened; after the quick draft, without the 31-leaf one. None when the order stays."""
    deep = next((k for k, c in enumerate(cases) if c.task_name == f"{GENERAL}-{DEEP}"), None)
    signal = QUICK_SIGNAL if quick else DEEP_SIGNAL
    many = any(r is None or r >= signal for r in rounds)
    if deep is None or deep <= picked or not many:
        return None
    dropped = {k for k, c in enumerate(cases) if quick and c.task_name == GENERAL}
    rest = [deepened(c) for k, c in enumerate(cases[picked:], picked) if k not in {deep, *dropped}]
    floor = next((k + 1 for k, c in enumerate(rest) if c.task_name == FLOOR_CASE), 0)
    return [*cases[:picked], *rest[:floor], cases[deep], *rest[floor:]]


def deepened(case: Case) -> Case:
    """The XGBoost draft grown as the deep one is (DEEP_XGBOOST), where the signal asked for larger trees;
    any other draft as it is."""
    if case.task_name != f"{GENERAL}-xgboost" or _XGBOOST_LEAVES[0] not in case.script:
        return case
    return replace(case, task_name=f"{GENERAL}-{DEEP_XGBOOST}", text=f"{case.text} of many leaves",
                   script=_edited(case.script, [_CODES, _XGBOOST_LEAVES]))


def in_order(cases: list[Case], names: list[str]) -> list[Case]:
    """The drafts of these case names, as deep_next ordered them (a resume reads the names back)."""
    by_name = {c.task_name: c for c in [*cases, *map(deepened, cases)]}
    return [by_name[name] for name in names]


def _learners(task: Task) -> list[str]:
    """The variants drafted for the task, first to last: text is classified by naive Bayes and regressed
    by trees after the linear model. A table gets LightGBM, then the floor (LightGBM's defaults); a large
    table gets a quick booster and the floor before them, and one of DEEP_ROWS rows LightGBM of many leaves
    after XGBoost. A table with free text gets a linear model next, then XGBoost; a table without free
    text ends with a forest."""
    if task.modality == "text":
        return ["", "lightgbm" if task.task_type == "regression" else "naive-bayes"]
    # before XGBoost: a 1-minute run on debates drafted LightGBM and XGBoost and had no time left for a
    # third, where in another run the linear draft was the best node (selection accuracy 0.698 against 0.667)
    linear = ["linear"] if free_text_in(task) else []
    # the forest over a table without free text (with it, the linear model is the third learner); CatBoost
    # last, where its time allows
    forest = [] if linear else ["forest"]
    forest += ["catboost"] if not linear and _catboost_fits(task) else []
    if labelled_rows(task) >= QUICK_ROWS:
        # the floor before the full booster: in a one-minute run on diamonds-cut (43,000 rows, five classes,
        # one core) the full booster was killed while it predicted, and the quick draft's log loss (0.585)
        # was the submission, where LightGBM's defaults score 0.548 in 4 s
        deep = [DEEP] if labelled_rows(task) >= DEEP_ROWS else []
        # no forest beside the deep draft: in eight five-minute runs on flights-late and military-gender
        # (262,000 and 1.4 million rows) it took 44 to 81 s, and no blend gave it any weight
        return [QUICK, FLOOR, "", *linear, "xgboost", *deep, *([] if deep else forest)]
    return ["", FLOOR, *linear, "xgboost", *forest]


def is_extra(case: Case) -> bool:
    """A draft of a learner that is there for the blend's variety, not to lead (policy.EXTRA_SHARE)."""
    return case.task_name in {f"{GENERAL}-{learner}" for learner in EXTRAS}


def _catboost_fits(task: Task) -> bool:
    """A table of one target and few enough rows for CatBoost (the adapter fits one model per target
    column, and its refit counts on one first fit)."""
    single = task.task_type != "multilabel-classification" and len(task.target) <= 1
    return single and labelled_rows(task) <= CATBOOST_ROWS


def _edited(script: str, edits: list[tuple[str, str]]) -> str:
    for old, new in edits:
        if old not in script:
            raise ValueError(
                f"the general solution no longer holds {old.strip().splitlines()[0]!r}"
            )
        script = script.replace(old, new)
    return script


def _with_functions(script: str, functions: str) -> str:
    """The script with `functions` in place of its own functions of those names (where the first of
    them was); none of them: the script as it is."""
    names = {
        node.name for node in parse_python(functions).body if isinstance(node, ast.FunctionDef)
    }
    own = [
        n for n in parse_python(script).body if isinstance(n, ast.FunctionDef) and n.name in names
    ]
    if not own:
        return script
    lines = script.splitlines(keepends=True)
    for node in reversed(own):
        del lines[node.lineno - 1 : node.end_lineno]
    lines.insert(own[0].lineno - 1, functions.strip("\n") + "\n")
    return re.sub(r"\n{4,}", "\n\n\n", "".join(lines))


def _fitted(script: str, task: Task) -> str:
    """The classifier for a classification task; early stopping on the absolute error for such a metric."""
    for regressor, classifier in _CLASSIFIER.items() if task.task_type != "regression" else ():
        script = script.replace(regressor, classifier)
    for learner, (default, absolute) in (
        _STOP_ON_ABSOLUTE.items() if task.metric_name in _ABSOLUTE else ()
    ):
        if learner in script:
            script = script.replace(default, absolute)
    return script
