"""The designs behind a verdict a second referee signs (issue 45): paired and unpaired comparisons, "X beats
each of the others" as one comparison per competitor, a figure's agreement with the published values as one
test that counts each spread once, staged designs, one seed per replicate, and the capped count of
replicates that would decide a claim (issue 47)."""
import dataclasses
import json
import math

import numpy as np
import pytest
from scipy import stats

from mcmc_lib import claims
from mcmc_lib.claims import AgreementCell, Estimate, Rule


def with_mean_and_sd(mean, sd, n):
    """n evenly spaced values with exactly this mean and sample standard deviation."""
    spread = np.arange(n) - (n - 1) / 2
    return mean + sd * spread / np.std(spread, ddof=1)


def binomial_se(p, n):
    return math.sqrt(p * (1 - p) / n)


# --- paired and unpaired comparisons: hand computations and refusals ------------------------------------

def test_paired_difference_is_a_student_t_interval_on_the_differences_of_pairs():
    x, y = np.array([3.0, 5.0, 4.0, 6.0]), np.array([1.0, 2.0, 2.5, 3.5])
    est = Estimate.paired_difference(x, y, seeds=[[1, i] for i in range(4)])
    d = x - y                                          # 2, 3, 1.5, 2.5
    half = stats.t.ppf(0.975, 3) * np.std(d, ddof=1) / 2
    assert math.isclose(est.value, 2.25) and math.isclose(est.high - est.value, half)
    assert est.seeds[3] == [1, 3] and "paired" in est.method and "sharing their seeds" in est.method
    ratio = Estimate.paired_ratio(x, y, seeds=range(4))
    logs = np.log(x / y)
    assert math.isclose(ratio.value, math.exp(logs.mean())) and ratio.method.startswith("geometric")
    assert math.isclose(math.log(ratio.high) - logs.mean(), stats.t.ppf(0.975, 3) * np.std(logs, ddof=1) / 2)


def test_pairing_is_refused_where_the_design_made_no_pairs():
    with pytest.raises(ValueError, match="same length to be paired"):
        Estimate.paired_difference([1.0, 2.0, 3.0], [1.0, 2.0], seeds=[0, 1, 2])
    with pytest.raises(ValueError, match="seeds must name the seed each pair shares"):
        Estimate.paired_difference([1.0, 2.0], [1.0, 3.0], seeds=None)
    with pytest.raises(ValueError, match="seeds must give one seed per replicate"):
        Estimate.paired_difference([1.0, 2.0, 4.0], [1.0, 3.0, 2.0], seeds=[0, 1])
    with pytest.raises(ValueError, match="positive"):
        Estimate.paired_ratio([1.0, -2.0], [1.0, 3.0], seeds=[0, 1])


def test_unpaired_difference_is_welchs_interval():
    x, y = [1.0, 2.0, 3.0, 4.0], [2.0, 4.0, 6.0, 8.0, 10.0]
    est = Estimate.unpaired_difference(x, y, seeds_x=[10, 11, 12, 13], seeds_y=[20, 21, 22, 23, 24])
    # by hand: var(x)/4 = 1.6667/4, var(y)/5 = 10/5; Welch-Satterthwaite df = 2.4167^2 / (0.0579 + 1) = 5.5208
    a, b = (5 / 3) / 4, 10 / 5
    df = (a + b) ** 2 / (a ** 2 / 3 + b ** 2 / 4)
    assert math.isclose(df, 5.52079, rel_tol=1e-5)
    half = stats.t.ppf(0.975, df) * math.sqrt(a + b)
    assert math.isclose(est.value, 2.5 - 6.0) and math.isclose(est.high - est.value, half)
    assert "Welch" in est.method and "(df 5.5)" in est.method and "unpaired" in est.method
    # counted per method for the replicates that would decide it; y kept beside x
    assert est.n_replicates == 4 and math.isclose(est.spread, math.sqrt(5 / 3 + 10))
    assert est.replicates == x and est.seeds == [10, 11, 12, 13]
    assert est.second_sample == {"replicates": y, "seeds": [20, 21, 22, 23, 24]}
    with pytest.raises(ValueError, match="seeds_y"):
        Estimate.unpaired_difference(x, y, seeds_y=[1, 2])
    with pytest.raises(ValueError, match="y must hold at least 2"):
        Estimate.unpaired_difference(x, [1.0])


def test_unpaired_ratio_is_welch_on_log_values_mapped_back():
    x, y = [1.0, 2.0, 4.0, 8.0], [1.0, 1.0, 2.0, 2.0, 4.0]
    est = Estimate.unpaired_ratio(x, y)
    lx, ly = np.log(x), np.log(y)
    a, b = lx.var(ddof=1) / 4, ly.var(ddof=1) / 5
    df = (a + b) ** 2 / (a ** 2 / 3 + b ** 2 / 4)
    centre, half = lx.mean() - ly.mean(), stats.t.ppf(0.975, df) * math.sqrt(a + b)
    assert math.isclose(est.value, math.exp(centre))
    assert math.isclose(est.low, math.exp(centre - half)) and math.isclose(est.high, math.exp(centre + half))
    # "geometric" first, so the count of replicates that would decide it is projected on the log scale
    assert est.method.startswith("geometric mean ratio") and "Welch interval on log values" in est.method
    assert est.replicates == x and est.second_sample["replicates"] == y
    assert math.isclose(est.spread, math.sqrt(lx.var(ddof=1) + ly.var(ddof=1)))
    with pytest.raises(ValueError, match="positive"):
        Estimate.unpaired_ratio([1.0, 0.0], y)


def test_each_replicate_has_its_own_seed():
    assert Estimate.from_replicates([1.0, 2.0, 3.0]).seeds == []             # seeds not given: allowed
    with pytest.raises(ValueError, match="seeds must give one seed per replicate: 3 replicates, 2 seeds"):
        Estimate.from_replicates([1.0, 2.0, 3.0], seeds=[[1, 0], [1, 1]])
    # a replicate made of two independent runs (a ratio of two chains) records the pair of their seeds
    pairs = [[[5, r], [6, r]] for r in range(3)]
    assert Estimate.from_replicates([1.0, 2.0, 3.0], seeds=pairs).seeds == pairs


# --- "X beats each of the others" ------------------------------------------------------------------------

def test_identical_samplers_do_not_beat_each_of_the_others():
    """With X, A, B, C identical, "X beats each" decided per competitor is reproduced at most at the
    one-sided level of one test (2.5%), paired (common random numbers) or not; decided against the best of
    the others, E[X - min(A, B, C)] > 0 makes it "reproduced" about half the time."""
    rng = np.random.default_rng(20245)
    rule = Rule.greater("X - competitor", 0.0, "the paper's ranking")
    n_sims, R = 600, 10
    per_competitor, paired, best_of_others = [], [], []
    for _ in range(n_sims):
        values = {m: rng.normal(0.0, 1.0, R) for m in "XABC"}
        per_competitor.append(claims.each_must_pass(
            rule.decide(e) for e in claims.against_each(values, "X").values()))
        best = np.min([values[m] for m in "ABC"], axis=0)
        best_of_others.append(rule.decide(Estimate.from_replicates(values["X"] - best)))
        common = rng.normal(0.0, 1.0, R)                 # what every method's replicate r shares
        crn = {m: common + rng.normal(0.0, 0.5, R) for m in "XABC"}
        paired.append(claims.each_must_pass(
            rule.decide(e) for e in claims.against_each(crn, "X", common_seeds=range(R)).values()))
    nominal = 0.025 + 3 * binomial_se(0.025, n_sims)
    assert per_competitor.count(claims.REPRODUCED) / n_sims <= nominal
    assert paired.count(claims.REPRODUCED) / n_sims <= nominal
    assert best_of_others.count(claims.REPRODUCED) / n_sims > 0.3       # the biased design, as a contrast


def test_identical_samplers_are_not_found_worse_than_each_more_often_than_one_test_allows():
    """"X beats each of k others" is not reproduced as soon as one comparison fails: at the rule's 95% per
    comparison, k identical competitors would fail it up to k times as often as one test; counted at the
    family-wise level (each_comparison), at most 2.5%."""
    rng = np.random.default_rng(20246)
    rule = Rule.greater("X - competitor", 0.0, "the paper's ranking")
    n_sims, R, names = 1000, 10, "XABCDE"
    family, union = [], []
    for _ in range(n_sims):
        estimates = claims.against_each({m: rng.normal(0.0, 1.0, R) for m in names}, "X")
        family.append(claims.each_must_pass(claims.each_comparison(rule, estimates)[0].values()))
        union.append(claims.each_must_pass(rule.decide(e) for e in estimates.values()))
    assert family.count(claims.NOT_REPRODUCED) / n_sims <= 0.025 + 3 * binomial_se(0.025, n_sims)
    assert union.count(claims.NOT_REPRODUCED) / n_sims > 0.05          # the eager union, as a contrast
    assert family.count(claims.REPRODUCED) == union.count(claims.REPRODUCED)   # the other side is unchanged


def test_a_comparison_failing_only_at_the_rule_level_leaves_the_claim_inconclusive(tmp_path):
    registry = beats_each_registry(tmp_path)
    rule = Rule.greater("log min ESS/s of X - of the competitor", 0.0, "the paper's ranking")
    # B's margin is chosen so that the 95% Welch interval lies below 0 and the 97.5% one crosses it
    x, a = with_mean_and_sd(3.0, 0.5, 12), with_mean_and_sd(1.0, 0.5, 12)
    t95, t975 = stats.t.ppf(0.975, 22), stats.t.ppf(0.9875, 22)
    se = 0.5 * math.sqrt(2 / 12)
    b = with_mean_and_sd(3.0 + se * (t95 + t975) / 2, 0.5, 12)
    estimates = claims.against_each({"X": x, "A": a, "B": b}, "X")
    assert rule.decide(estimates["B"]) == claims.NOT_REPRODUCED
    assert registry.decide_each("close", estimates) == claims.INCONCLUSIVE
    claim = registry.claims[0]
    assert claim.comparisons["B"]["outcome"] == claims.INCONCLUSIVE
    assert claim.comparisons["B"]["estimate"]["level"] == pytest.approx(0.975)
    assert "; vs B " in claim.reproduced and "(97.5%)" in claim.reproduced
    assert "(at the values observed: vs B leans not reproduced)." in claim.note


@pytest.mark.parametrize("build", ["from_replicates", "log", "paired_difference", "paired_ratio",
                                   "unpaired_difference", "unpaired_ratio"])
def test_an_estimate_restated_at_another_level_is_the_one_built_at_it(build):
    rng = np.random.default_rng(5)
    x, y = np.exp(rng.normal(1.0, 0.3, 8)), np.exp(rng.normal(0.8, 0.5, 11))
    seeds = [[1, i] for i in range(8)]
    make = {"from_replicates": lambda level: Estimate.from_replicates(x, seeds, level),
            "log": lambda level: Estimate.from_replicates(x, seeds, level, log_scale=True),
            "paired_difference": lambda level: Estimate.paired_difference(x, y[:8], seeds=seeds, level=level),
            "paired_ratio": lambda level: Estimate.paired_ratio(x, y[:8], seeds=seeds, level=level),
            "unpaired_difference": lambda level: Estimate.unpaired_difference(x, y, seeds_x=seeds, level=level),
            "unpaired_ratio": lambda level: Estimate.unpaired_ratio(x, y, seeds_x=seeds, level=level)}[build]
    restated, direct = make(0.95).at_level(0.99), make(0.99)
    for key in ("value", "low", "high", "level", "spread"):
        assert getattr(restated, key) == pytest.approx(getattr(direct, key)), key
    for key in ("n_replicates", "replicates", "seeds", "second_sample", "interval"):
        assert getattr(restated, key) == getattr(direct, key), key
    assert "99%" in restated.method and "95%" not in restated.method
    assert restated.low < make(0.95).low and restated.high > make(0.95).high


def test_an_interval_given_as_numbers_cannot_be_restated():
    given = Estimate.from_interval(1.0, 0.5, 1.5, 10, "from the paper's figure")
    with pytest.raises(ValueError, match="cannot be stated at another level"):
        given.at_level(0.99)
    with pytest.raises(ValueError, match="cannot be stated at another level"):
        Estimate.win_fraction(["X", "A", "X"], "X", competitors=["X", "A"]).at_level(0.99)
    with pytest.raises(ValueError, match="interval must be one of"):
        Estimate(1.0, 0.5, 1.5, 3, interval="bootstrap")
    with pytest.raises(ValueError, match="level"):
        Estimate.from_replicates([1.0, 2.0, 3.0]).at_level(1.5)


def test_against_each_needs_ours_and_a_competitor():
    with pytest.raises(ValueError, match="values must hold 'X'"):
        claims.against_each({"A": [1.0, 2.0], "B": [1.0, 3.0]}, "X")


def test_each_must_pass():
    R, N, I = claims.REPRODUCED, claims.NOT_REPRODUCED, claims.INCONCLUSIVE
    assert claims.each_must_pass([R, R]) == R
    assert claims.each_must_pass([R, I]) == I
    assert claims.each_must_pass([I, N, R]) == N


def beats_each_registry(tmp_path):
    registry = claims.ClaimsRegistry("demo", directory=tmp_path)
    for id in ("clear", "close", "loses"):
        registry.declare(id, statement="X has the highest min ESS/s", source="Table 2", published="X first",
                         rule=Rule.greater("log min ESS/s of X - of the competitor", 0.0, "the paper's ranking"),
                         section="sec-demo", short="X beats each")
    return registry


def test_decide_each_records_every_comparison(tmp_path, monkeypatch):
    monkeypatch.setenv("MCMC_BOOK_PROFILE", "smoke")
    registry = beats_each_registry(tmp_path)
    seeds = {m: [[7, i, r] for r in range(12)] for i, m in enumerate("XAB")}
    clear = {"X": with_mean_and_sd(3.0, 0.5, 12), "A": with_mean_and_sd(1.0, 0.5, 12),
             "B": with_mean_and_sd(2.0, 0.5, 12)}
    assert registry.decide_each("clear", claims.against_each(clear, "X", seeds=seeds)) == claims.REPRODUCED
    close = dict(clear, B=with_mean_and_sd(2.9, 0.5, 12))
    assert registry.decide_each("close", claims.against_each(close, "X")) == claims.INCONCLUSIVE
    loses = dict(clear, A=with_mean_and_sd(4.0, 0.5, 12))
    with pytest.raises(ValueError, match="cause"):
        registry.decide_each("loses", claims.against_each(loses, "X"))
    with pytest.raises(ValueError, match="estimates"):
        registry.decide_each("loses", {"A": 1.0})
    assert registry.decide_each("loses", claims.against_each(loses, "X"), cause="none found") == claims.NOT_REPRODUCED

    first, second, third = registry.claims
    assert set(first.comparisons) == {"A", "B"} and first.comparisons["A"]["outcome"] == claims.REPRODUCED
    assert first.comparisons["B"]["estimate"]["second_sample"]["seeds"] == seeds["B"]
    assert first.estimate["value"] == pytest.approx(1.0)      # the closest competitor's margin decides
    assert first.reproduced.startswith("vs A 2.0 [1.5, 2.5]") and "; vs B 1.0 [" in first.reproduced
    assert first.reproduced.endswith("(R = 12)")
    assert ("every one must pass at 95%, and one that fails counts against the claim only at the family-wise "
            "97.5% (Bonferroni, 2 comparisons): vs A reproduced, vs B reproduced." in first.note)
    # the undecided comparison: what would decide it, and which way it leans
    assert "vs B inconclusive" in second.note and second.estimate["value"] == pytest.approx(0.1)
    needed = Rule.greater("d", 0.0, "w").replicates_to_decide(claims.against_each(close, "X")["B"])
    assert f"About {needed} replicates at this spread would decide every comparison" in second.note
    assert "(at the values observed: vs B leans reproduced)." in second.note
    assert third.note.endswith("Cause: none found") and third.estimate["value"] == pytest.approx(-1.0)

    registry.write()
    loaded = claims.load_claims(tmp_path)["demo"]
    assert [c["outcome"] for c in loaded] == [claims.REPRODUCED, claims.INCONCLUSIVE, claims.NOT_REPRODUCED]
    assert json.loads(json.dumps(loaded))[0]["comparisons"]["A"]["estimate"]["n_replicates"] == 12
    page = claims.claims_html("demo", loaded, link_prefix="./")
    assert page.count("<tr>") == 4 and "vs A 2.0 [" in page and "Welch" in page
    assert claims.verdict_html("demo", loaded).count("X beats each") == 3


def test_decide_each_waits_for_its_planned_replicates_and_tells_its_stages(tmp_path):
    registry = beats_each_registry(tmp_path)
    values = {"X": with_mean_and_sd(3.0, 0.5, 10), "A": with_mean_and_sd(1.0, 0.5, 10),
              "B": with_mean_and_sd(2.0, 0.5, 10)}
    estimates = claims.against_each(values, "X")
    with pytest.raises(ValueError, match="stages"):
        registry.decide_each("clear", estimates, stages=(10, 25))      # the look at 25 has not happened
    assert registry.decide_each("clear", estimates, planned=25, stages=(10, 25)) == claims.INCONCLUSIVE
    note = registry.claims[0].note
    assert note.startswith("Two-stage design: 10 replicates, then 15 more after a first look. Decided at the 25")
    assert "(on those run so far the rule reads reproduced)" in note and registry.claims[0].stages == [10, 25]


# --- a figure's agreement with the published values --------------------------------------------------------

@pytest.mark.parametrize("test", claims.AGREEMENT_TESTS)
@pytest.mark.parametrize("authors_replicates", [False, True])
def test_figure_cells_equal_to_the_published_in_expectation_are_reproduced_at_one_minus_alpha(
        test, authors_replicates):
    """Five cells whose true value is the published one, ours from 8 replicates (spreads differing by cell),
    the published value with its own error (a known standard error, or the mean of the authors' 12
    replicates): the figure is reproduced at about 1 - alpha = 95%."""
    rng = np.random.default_rng([45, authors_replicates, len(test)])
    rule = Rule.cells_agree("acceptance", "the paper's figure", test=test)
    n_sims, outcomes = 800, []
    for _ in range(n_sims):
        cells = []
        for j in range(5):
            ours = rng.normal(j, 1 + j / 3, 8)
            if authors_replicates:
                cells.append(AgreementCell.from_authors_replicates(f"cell {j}", ours, rng.normal(j, 2.0, 12)))
            else:
                cells.append(AgreementCell(f"cell {j}", ours, j + rng.normal(0.0, 0.3), published_se=0.3))
        outcomes.append(rule.assess(cells).outcome)
    rate = outcomes.count(claims.REPRODUCED) / n_sims
    # Welch's df is an approximation, and the chi-squared sum compounds it: a few binomial se's either way
    assert abs(rate - 0.95) < 4 * binomial_se(0.95, n_sims) + 0.005, rate
    assert claims.INCONCLUSIVE not in outcomes                 # no tolerance given: never inconclusive


def test_figure_agreement_by_hand():
    """One z per cell with each spread once: (ours - published) / sqrt(our se^2 + published se^2), its Welch
    t read as the normal deviate of the same p; max |z| against the Bonferroni bound."""
    ours = with_mean_and_sd(1.0, 0.4, 10)
    cells = [AgreementCell("a", ours, 0.9, published_se=0.05),
             AgreementCell("b", with_mean_and_sd(2.0, 0.2, 10), 2.0, published_se=0.1, published_n=20)]
    agreement = Rule.cells_agree("q", "w").assess(cells)
    table = agreement.table()
    our_var = 0.4 ** 2 / 10
    joint_se = math.sqrt(our_var + 0.05 ** 2)
    df = (our_var + 0.05 ** 2) ** 2 / (our_var ** 2 / 9)           # a known published se adds no df term
    t = 0.1 / joint_se
    z = stats.norm.isf(stats.t.sf(t, df))
    assert table.loc["a", "joint se"] == pytest.approx(joint_se) and table.loc["a", "df"] == pytest.approx(df)
    assert table.loc["a", "z"] == pytest.approx(z) and table.loc["a", "p"] == pytest.approx(2 * stats.t.sf(t, df))
    b_var = 0.2 ** 2 / 10
    assert table.loc["b", "df"] == pytest.approx((b_var + 0.01) ** 2 / (b_var ** 2 / 9 + 0.01 ** 2 / 19))
    assert agreement.statistic == pytest.approx(z) and agreement.bound == pytest.approx(stats.norm.isf(0.05 / 4))
    assert agreement.p_value == pytest.approx(2 * table.loc["a", "p"]) and agreement.outcome == claims.REPRODUCED
    assert list(table.index) == ["a", "b"] and "replicates" not in table.columns
    chi = Rule.cells_agree("q", "w", test="chi-squared").assess(cells)
    assert chi.statistic == pytest.approx((table.z ** 2).sum()) and chi.bound == pytest.approx(stats.chi2.isf(0.05, 2))


def test_a_departing_cell_makes_the_figure_not_reproduced():
    cells = [AgreementCell(f"n = {n}", with_mean_and_sd(0.5, 0.1, 10), 0.5, published_se=0.02) for n in (10, 20)]
    cells.append(AgreementCell("n = 40", with_mean_and_sd(0.7, 0.1, 10), 0.5, published_se=0.02))
    agreement = Rule.cells_agree("acceptance", "w", tolerance=0.1).assess(cells)
    assert agreement.outcome == claims.NOT_REPRODUCED and agreement.p_value < 0.001
    assert agreement.table()["beyond Bonferroni bound"].tolist() == [False, False, True]


def test_an_underpowered_figure_is_inconclusive_and_says_what_would_decide_it():
    """No cell departs, but 5 replicates cannot see the paper's tolerance: inconclusive, with the count
    per cell (the published errors in every joint se) that gives the power, and which way it would go."""
    rule = Rule.cells_agree("acceptance", "w", tolerance=0.1)
    published_se = (0.02, 0.03)

    def assess(n, differences=(0.0, 0.0)):
        return rule.assess([AgreementCell(f"c{i}", with_mean_and_sd(0.5 + d, 0.15, n), 0.5, published_se=se)
                            for i, (d, se) in enumerate(zip(differences, published_se))])

    agreement = assess(5)
    assert agreement.outcome == claims.INCONCLUSIVE and agreement.power < 0.8
    needed = int(agreement.to_decide.split("About ")[1].split(" ")[0])
    assert assess(needed).power >= 0.8 > assess(needed - 1).power
    assert assess(needed).outcome == claims.REPRODUCED
    assert "the test would then read reproduced" in agreement.to_decide
    # a cell off by 0.09: inside the bound at 5 replicates, beyond it at the count that has the power
    leaning = assess(5, (0.09, 0.0))
    assert leaning.outcome == claims.INCONCLUSIVE and "would then read not reproduced" in leaning.to_decide
    # the authors' error alone too wide: no number of ours decides it
    wide = Rule.cells_agree("acceptance", "w", tolerance=0.1).assess(
        [AgreementCell("c", with_mean_and_sd(0.5, 0.15, 5), 0.5, published_se=0.08)])
    assert wide.outcome == claims.INCONCLUSIVE and wide.to_decide.startswith("No number of our replicates")


def test_decide_figure_round_trip(tmp_path, monkeypatch):
    monkeypatch.setenv("MCMC_BOOK_PROFILE", "smoke")
    registry = claims.ClaimsRegistry("demo", directory=tmp_path)
    rule = Rule.cells_agree("KMC acceptance", "Fig. 2's error bars", tolerance=0.1)
    registry.declare("fig2", statement="Figure 2 agrees", source="Fig. 2", published="6 cells", rule=rule,
                     section="sec-fig2", short="Figure 2 agrees")
    cells = [AgreementCell(f"d = {d}", with_mean_and_sd(0.6, 0.15, 5), 0.6, 0.02, seeds=[[3, d, r] for r in range(5)])
             for d in (2, 8)]
    other = Rule.cells_agree("KMC acceptance", "Fig. 2's error bars").assess(cells)
    with pytest.raises(ValueError, match="agreement must be the declared rule"):
        registry.decide_figure("fig2", other)
    with pytest.raises(ValueError, match="decide_figure"):
        registry.decide("fig2", Estimate.from_replicates([1.0, 2.0]))
    agreement = rule.assess(cells)
    assert registry.decide_figure("fig2", agreement, stages=(3, 5)) == claims.INCONCLUSIVE
    claim = registry.claims[0]
    assert claim.note.startswith("Two-stage design: 3 replicates, then 2 more after a first look. No cell departs")
    assert "About " in claim.note and "replicates per cell" in claim.note and claim.stages == [3, 5]
    assert claim.rule.startswith("every cell of KMC acceptance agrees with the published value")
    # the rule made again with the same arguments (no tolerance: NaN fields) is the declared rule
    registry.declare("fig5", statement="Figure 5 agrees", source="Fig. 5", published="2 cells",
                     rule=Rule.cells_agree("KMC acceptance", "Fig. 5"))
    again = Rule.cells_agree("KMC acceptance", "Fig. 5").assess(cells)
    assert registry.decide_figure("fig5", again) == claims.REPRODUCED
    registry.write()
    loaded = claims.load_claims(tmp_path)["demo"]
    record = json.loads(json.dumps(loaded))[0]
    assert [c["cell"] for c in record["cells"]] == ["d = 2", "d = 8"] and record["cells"][1]["seeds"][4] == [3, 8, 4]
    assert record["estimate"]["value"] == pytest.approx(agreement.statistic)
    assert record["reproduced"].startswith("max |z| ") and record["reproduced"].endswith("(R = 5)")
    page = claims.claims_html("demo", loaded, link_prefix="./")
    assert "max |z|" in page and "R = 5" in page and "claim-inconclusive" in page
    assert "Figure 2 agrees" in claims.verdict_html("demo", loaded) and page.count("<tr>") == 3


def test_agreement_rules_and_cells_refuse_what_they_cannot_read():
    with pytest.raises(ValueError, match="test"):
        Rule.cells_agree("q", "w", test="t-test")
    with pytest.raises(ValueError, match="tolerance"):
        Rule.cells_agree("q", "w", tolerance=-0.1)
    with pytest.raises(ValueError, match="alpha"):
        Rule.cells_agree("q", "w", alpha=1.5)
    with pytest.raises(ValueError, match="published_se"):
        AgreementCell("c", [1.0, 2.0], 1.0, published_se=-1.0)
    with pytest.raises(ValueError, match="published_n"):
        AgreementCell("c", [1.0, 2.0], 1.0, 0.1, published_n=1)
    with pytest.raises(ValueError, match="seeds"):
        AgreementCell("c", [1.0, 2.0], 1.0, 0.1, seeds=[1])
    with pytest.raises(ValueError, match="distinct names"):
        Rule.cells_agree("q", "w").assess([AgreementCell("c", [1.0, 2.0], 1.0), AgreementCell("c", [1.0, 2.0], 1.0)])


# --- staged designs and the capped count (issue 47) --------------------------------------------------------

def test_a_two_stage_design_is_recorded_and_told(tmp_path):
    registry = claims.ClaimsRegistry("demo", directory=tmp_path)
    rule = Rule.greater("ratio", 1.0, "paper")
    registry.declare("staged", statement="s", source="Table 1", published="1.5", rule=rule)
    estimate = Estimate.from_replicates(with_mean_and_sd(1.5, 0.1, 25), seeds=range(25))
    for bad in ((25, 10), (10, 20), (25,), (10.0, 25), (True, 25)):
        with pytest.raises(ValueError, match="stages"):
            registry.decide("staged", estimate, stages=bad)
    assert registry.decide("staged", estimate, stages=(10, 25), note="Seeds [1, r].") == claims.REPRODUCED
    claim = registry.claims[0]
    assert claim.stages == [10, 25]
    assert claim.note == "Two-stage design: 10 replicates, then 15 more after a first look. Seeds [1, r]."
    registry.declare("three", statement="s", source="Table 1", published="1.5", rule=rule)
    registry.decide("three", estimate, stages=(5, 10, 25))
    assert registry.claims[1].note == "Three-stage design: 5 replicates, then 5 more, then 15 more after each look."


def test_the_count_that_would_decide_is_capped_a_rounding_error_from_the_threshold(tmp_path):
    """Issue 47: an estimate a rounding error above its threshold made the count overflow into scipy."""
    rule = Rule.greater("q", 0.3, why="x")
    estimate = Estimate.from_replicates([0.3, 0.3000000000000001, 0.31, 0.29])
    assert rule.replicates_to_decide(estimate) is None
    assert rule.replicates_to_decide_text(estimate) == (
        f"More than {claims.MAX_REPLICATES_TO_DECIDE:,} replicates at this spread would decide it")
    registry = claims.ClaimsRegistry("demo", directory=tmp_path)
    registry.declare("q", statement="s", source="Table 1", published="0.3", rule=rule)
    assert registry.decide("q", estimate) == claims.INCONCLUSIVE
    assert registry.claims[0].note == "More than 100,000 replicates at this spread would decide it."
    # no spread at all: nothing to project from
    flat = Estimate.from_interval(0.31, 0.2, 0.4, 4, "given")
    assert rule.replicates_to_decide_text(flat) == "More replicates or longer runs would decide it"


def test_the_verdict_table_shows_the_comparison_that_decides(tmp_path):
    """A "beats each" claim's row shows the deciding comparison, not all of them (they are in the detailed
    table)."""
    registry = claims.ClaimsRegistry("demo", directory=tmp_path, profile="default")
    registry.declare("each", statement="X beats each", source="Table 1", published="X first",
                     rule=claims.Rule.greater("ratio of X to each", 1.0, why="the paper ranks X first"))
    rng = np.random.default_rng(3)
    x = rng.lognormal(1.0, 0.05, 10)
    values = {"X": x, "A": x / 1.5 * rng.lognormal(0, 0.05, 10), "B": x / 1.1 * rng.lognormal(0, 0.05, 10),
              "C": x / 2.0 * rng.lognormal(0, 0.05, 10)}
    registry.decide_each("each", claims.against_each(values, "X", ratio=True))
    record = [dataclasses.asdict(c) for c in registry.claims]
    row = claims.verdict_html("demo", record)
    assert "vs B " in row and "deciding one of 3 comparisons" in row
    assert "vs A " not in row and "vs C " not in row
    assert "vs A " in claims.claims_html("demo", record)


def test_deciding_comparison_is_the_failure_else_the_undecided_else_the_closest_pass():
    rule = Rule.greater("difference", 0.0, why="X beats each")
    passing = {"A": Estimate(2.0, 1.0, 3.0, 10), "B": Estimate(1.0, 0.2, 1.8, 10), "C": Estimate(3.0, 2.0, 4.0, 10)}
    assert claims.deciding_comparison(rule, passing) == "B"          # nearest the threshold among passes
    undecided = {**passing, "D": Estimate(0.5, -0.5, 1.5, 10)}
    assert claims.deciding_comparison(rule, undecided) == "D"
    failing = {**undecided, "E": Estimate.from_replicates([-5.0, -5.1, -4.9, -5.05])}
    assert claims.deciding_comparison(rule, failing) == "E"
