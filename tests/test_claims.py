"""The claim record: the outcome rule on intervals, estimates from replicates, refusals, rendering."""
import json
import math

import numpy as np
import pytest

from mcmc_lib import claims
from mcmc_lib.claims import Estimate, Rule


def interval(low, high):
    return Estimate.from_interval((low + high) / 2, low, high, 5, "given")


@pytest.mark.parametrize("rule, expected", [
    # an interval on each side of the threshold and one straddling it, for both directions
    (Rule.greater("ratio", 1.0, "paper"), {(1.1, 1.3): claims.REPRODUCED, (0.7, 0.9): claims.NOT_REPRODUCED,
                                           (0.9, 1.2): claims.INCONCLUSIVE}),
    (Rule.less("error", 1.0, "paper"), {(0.7, 0.9): claims.REPRODUCED, (1.1, 1.3): claims.NOT_REPRODUCED,
                                        (0.9, 1.2): claims.INCONCLUSIVE}),
    (Rule.within("rate", 0.5, 0.6, "paper"), {(0.52, 0.58): claims.REPRODUCED, (0.62, 0.7): claims.NOT_REPRODUCED,
                                              (0.3, 0.45): claims.NOT_REPRODUCED, (0.55, 0.65): claims.INCONCLUSIVE,
                                              (0.4, 0.7): claims.INCONCLUSIVE}),
])
def test_outcome_rule_on_each_side_and_straddling(rule, expected):
    for (low, high), outcome in expected.items():
        assert rule.decide(interval(low, high)) == outcome, (rule.kind, low, high)


def test_estimate_from_replicates_is_a_student_t_interval():
    values = [1.0, 2.0, 3.0, 4.0]
    est = Estimate.from_replicates(values, seeds=[[7, i] for i in range(4)])
    half = 3.182446305284263 * np.std(values, ddof=1) / 2       # t_{0.975, 3} sd / sqrt(4)
    assert est.value == 2.5 and math.isclose(est.high - est.value, half, rel_tol=1e-9)
    assert est.n_replicates == 4 and est.seeds[2] == [7, 2] and est.replicates == values
    geo = Estimate.from_replicates([1.0, 4.0], log_scale=True)
    assert math.isclose(geo.value, 2.0) and geo.low < 2.0 < geo.high
    with pytest.raises(ValueError, match="at least 2"):
        Estimate.from_replicates([1.0])
    with pytest.raises(ValueError, match="finite"):
        Estimate.from_replicates([1.0, float("nan")])


def test_replicates_that_all_agree_give_no_interval_not_a_zero_width_one():
    """Two replicates both at 1/3 are no evidence that every replicate is: the interval is undefined (NaN
    ends, so a rule reads it as inconclusive) and the text says why, rather than 0.333 [0.333, 0.333]."""
    rule = Rule.greater("fraction", 5 / 6, why="the paper: all six")
    for estimate in (Estimate.from_replicates([1 / 3, 1 / 3]),
                     Estimate.from_replicates([2.0, 2.0, 2.0], log_scale=True),
                     Estimate.unpaired_difference([1.0, 1.0], [0.5, 0.5]),
                     Estimate.unpaired_ratio([2.0, 2.0], [1.0, 1.0])):
        assert math.isnan(estimate.low) and math.isnan(estimate.high) and estimate.spread == 0
        assert rule.decide(estimate) == claims.INCONCLUSIVE
        assert estimate.text().endswith("(replicates all equal, no interval)"), estimate.text()
        assert rule.replicates_to_decide_text(estimate) == "More replicates or longer runs would decide it"
        assert math.isnan(estimate.at_level(0.9).low)
    assert Estimate.from_replicates([1 / 3, 1 / 3]).text() == "0.333 (replicates all equal, no interval)"
    # one replicate apart from the rest gives an interval again
    assert Estimate.from_replicates([1 / 3, 1 / 3, 0.5]).high > 0.5


def test_win_fraction_counts_the_claimed_winner():
    est = Estimate.win_fraction(["M-CMA", "AM", "M-CMA", "M-CMA"], "M-CMA")
    assert est.value == 0.75 and 0 <= est.low < 0.75 < est.high <= 1
    # a winner in every replicate: the interval still admits less than certainty
    sure = Estimate.win_fraction(["A"] * 8, "A")
    assert sure.value == 1.0 and sure.low < 1.0 and sure.high == 1.0


def with_mean_and_sd(mean, sd, n):
    """n evenly spaced values with exactly this mean and sample standard deviation."""
    spread = np.arange(n) - (n - 1) / 2
    return mean + sd * spread / np.std(spread, ddof=1)


def test_inconclusive_claim_says_how_many_replicates_would_decide(tmp_path):
    registry = claims.ClaimsRegistry("demo", directory=tmp_path)
    rule = Rule.greater("ratio of tau", 1.0, "the paper's direction")
    registry.declare("bnn", statement="PL with non-reversible u is 1.25x better", source="Sec. 6, Table 3",
                     published="1.25x", rule=rule)
    # mean 1.1, sd 0.4 over 4 replicates: the interval straddles 1
    values = [0.7, 1.5, 0.8, 1.4]
    assert registry.decide("bnn", Estimate.from_replicates(values)) == claims.INCONCLUSIVE
    needed = rule.replicates_to_decide(Estimate.from_replicates(values))
    assert f"About {needed} replicates" in registry.claims[0].note
    # the count is the smallest that decides at this mean and spread (Student-t, not the normal's z)
    sd = float(np.std(values, ddof=1))
    assert rule.decide(Estimate.from_replicates(with_mean_and_sd(1.1, sd, needed))) == claims.REPRODUCED
    assert rule.decide(Estimate.from_replicates(with_mean_and_sd(1.1, sd, needed - 1))) == claims.INCONCLUSIVE
    assert needed > math.ceil((1.959963984540054 * sd / 0.1) ** 2)


@pytest.mark.parametrize("values, favours, outcome", [
    ([2.0, 2.1, 1.9, 2.0], True, claims.INCONCLUSIVE),        # a pass through an artefact is no pass
    ([2.0, 2.1, 1.9, 2.0], False, claims.INCONCLUSIVE),
    ([0.5, 0.6, 0.4, 0.5], True, claims.NOT_REPRODUCED),      # the artefact helped the claim, which still failed
    ([0.5, 0.6, 0.4, 0.5], False, claims.INCONCLUSIVE),       # the artefact may have caused the failure
    ([0.7, 1.5, 0.8, 1.4], True, claims.INCONCLUSIVE)])
def test_an_artefact_never_lets_a_claim_pass(tmp_path, values, favours, outcome):
    registry = claims.ClaimsRegistry("demo", directory=tmp_path)
    registry.declare("c", statement="s", source="Table 1", published="1.5", rule=Rule.greater("ratio", 1.0, "paper"))
    artefact = claims.Artefact("round 0 priced out every large arm", "a rerun that scores every arm", favours)
    assert registry.decide("c", Estimate.from_replicates(values), cause="the cost model", artefact=artefact) == outcome
    note = registry.claims[0].note
    assert "round 0 priced out every large arm" in note and "a rerun that scores every arm" in note
    assert ("replicates would decide" not in note) and ("About" not in note)   # more replicates cannot help


def test_an_artefact_must_be_an_artefact(tmp_path):
    registry = claims.ClaimsRegistry("demo", directory=tmp_path)
    registry.declare("c", statement="s", source="Table 1", published="1.5", rule=Rule.greater("ratio", 1.0, "paper"))
    with pytest.raises(TypeError, match="artefact"):
        registry.decide("c", Estimate.from_replicates([2.0, 2.1, 1.9]), artefact="forced")


@pytest.mark.parametrize("rule, mean", [(Rule.greater("ratio", 1.0, "paper"), 1.07),
                                        (Rule.less("ratio", 1.0, "paper"), 0.9),
                                        (Rule.within("ratio", 0.8, 1.25, "paper"), 1.2)])
def test_replicates_to_decide_a_geometric_mean_count_on_the_log_scale(rule, mean):
    """A geometric mean's interval is Student-t on log(values): the projection works there too."""
    logs = with_mean_and_sd(math.log(mean), 0.2, 10)
    estimate = Estimate.from_replicates(np.exp(logs), log_scale=True)
    assert rule.decide(estimate) == claims.INCONCLUSIVE
    needed = rule.replicates_to_decide(estimate)
    decided = Estimate.from_replicates(np.exp(with_mean_and_sd(math.log(mean), 0.2, needed)), log_scale=True)
    short = Estimate.from_replicates(np.exp(with_mean_and_sd(math.log(mean), 0.2, needed - 1)), log_scale=True)
    assert rule.decide(decided) != claims.INCONCLUSIVE and rule.decide(short) == claims.INCONCLUSIVE


def joint_se_band(n, sd_paper=0.2, n_paper=50):
    """Two joint standard errors of ours (n replicates) and the paper's: a band that narrows as n grows."""
    half = 2 * math.sqrt(sd_paper**2 / n_paper + sd_paper**2 / n)
    return Rule.within("ours - paper's", -half, half, "two joint standard errors")


@pytest.mark.parametrize("mean, verdict", [(0.05, claims.REPRODUCED),        # inside the limit band (0.057)
                                           (0.062, claims.NOT_REPRODUCED)])  # inside today's band, outside the limit
def test_replicates_to_decide_lets_a_band_move_with_the_replicates(tmp_path, mean, verdict):
    """With the band fixed at 100 replicates the count would be wrong: the band narrows as they grow, so
    the count is the smallest n at which the interval clears the band drawn for n."""
    estimate = Estimate.from_replicates(with_mean_and_sd(mean, 0.2, 100))
    rule = joint_se_band(100)
    assert rule.decide(estimate) == claims.INCONCLUSIVE
    needed = rule.replicates_to_decide(estimate, joint_se_band)
    at = lambda n: Estimate.from_replicates(with_mean_and_sd(mean, 0.2, n))
    assert joint_se_band(needed).decide(at(needed)) == verdict
    assert joint_se_band(needed - 1).decide(at(needed - 1)) == claims.INCONCLUSIVE
    assert needed != rule.replicates_to_decide(estimate)          # what a fixed band would have said
    registry = claims.ClaimsRegistry("demo", directory=tmp_path)
    registry.declare("cell", statement="s", source="Fig. 2", published="0.66", rule=rule)
    for bad in (3, lambda n: 0.07):
        with pytest.raises(ValueError, match="rule_at"):
            registry.decide("cell", estimate, rule_at=bad)
    assert registry.decide("cell", estimate, rule_at=joint_se_band) == claims.INCONCLUSIVE
    assert f"About {needed} replicates at this spread would decide it, the band narrowing" in registry.claims[0].note


def test_a_claim_with_planned_replicates_waits_for_all_of_them(tmp_path):
    """With fewer replicates than planned the claim stays inconclusive whatever the interval says (no
    verdict at whichever count first clears the threshold); at the planned count the rule decides."""
    registry = claims.ClaimsRegistry("demo", directory=tmp_path)
    rule = Rule.greater("ratio", 1.0, "paper")
    clear = Estimate.from_replicates(with_mean_and_sd(1.5, 0.1, 19))
    for id in ("early", "done"):
        registry.declare(id, statement="s", source="Table 1", published="1.5", rule=rule)
    assert registry.decide("early", clear, planned=25) == claims.INCONCLUSIVE
    note = registry.claims[0].note
    assert "25 replicates fixed before the run; 19 have run, the other 6" in note
    assert "reads reproduced" in note and "About" not in note
    full = Estimate.from_replicates(with_mean_and_sd(1.5, 0.1, 25))
    assert registry.decide("done", full, planned=25) == claims.REPRODUCED
    assert "fixed before the run" not in registry.claims[1].note
    registry.declare("undecided", statement="s", source="Table 1", published="1.5", rule=rule)
    straddling = Estimate.from_replicates(with_mean_and_sd(1.02, 0.2, 25))
    assert registry.decide("undecided", straddling, planned=25) == claims.INCONCLUSIVE
    note = registry.claims[2].note           # all planned ones ran: a new set decides, not a longer one
    assert note.startswith("Still undecided at the 25 replicates fixed before the run. About ")
    assert note.endswith("would decide it, as a new set of repeats whose count is fixed before they run.")
    registry.declare("bad", statement="s", source="Table 1", published="1.5", rule=rule)
    for bad in (18, 2.5, True, "25"):         # a refused call leaves the claim declared
        with pytest.raises(ValueError, match="planned"):
            registry.decide("bad", clear, planned=bad)


def test_replicates_to_decide_is_none_without_a_spread_or_a_gap():
    rule = Rule.greater("ratio", 1.0, "paper")
    assert rule.replicates_to_decide(interval(0.9, 1.2)) is None                      # no spread recorded
    assert rule.replicates_to_decide(Estimate.from_replicates([0.8, 1.2])) is None    # mean on the threshold
    geometric = Estimate.from_replicates([0.5, 2.0, 1.5], log_scale=True)
    assert Rule.greater("difference", 0.0, "paper").replicates_to_decide(geometric) is None   # log(0) undefined


def test_a_claim_without_source_or_rule_is_refused(tmp_path):
    registry = claims.ClaimsRegistry("demo", directory=tmp_path)
    rule = Rule.greater("x", 0.0, "paper")
    with pytest.raises(ValueError, match="source"):
        registry.declare("a", statement="s", source="", published="1", rule=rule)
    with pytest.raises(ValueError, match="rule"):
        registry.declare("a", statement="s", source="Table 1", published="1", rule="x > 0")
    with pytest.raises(ValueError, match="why"):
        Rule.greater("x", 0.0, "")
    with pytest.raises(ValueError, match="not declared"):
        registry.decide("never", interval(1, 2))
    registry.declare("b", statement="s", source="Table 1", published="1", rule=rule)
    with pytest.raises(ValueError, match="declared but never decided"):
        registry.write()
    with pytest.raises(ValueError, match="cause"):
        registry.decide("b", interval(-2, -1))          # not reproduced needs a cause


def test_new_form_round_trip_and_rendering(tmp_path, monkeypatch):
    monkeypatch.setenv("MCMC_BOOK_PROFILE", "smoke")
    registry = claims.ClaimsRegistry("demo", directory=tmp_path)
    registry.declare("up", statement="A beats B <by far>", source="Table 2", published="2.1x",
                     rule=Rule.greater("A / B", 1.0, "the paper's ranking"), section="sec-demo")
    registry.decide("up", Estimate.from_replicates([2.0, 2.2, 1.9]), wins={"A": 3, "B": 0})
    registry.declare("down", statement="C is small", source="Fig. 3", published="0.1",
                     rule=Rule.less("C", 0.2, "read off Fig. 3"))
    registry.decide("down", Estimate.from_replicates([0.3, 0.35, 0.32]), cause="none found")
    registry.not_run("big", statement="D at N = 10^6", source="Sec. 5", published="0.5",
                     missing="MNIST training set", cost="66 hours per repeat on 2 cores")
    registry.write()
    loaded = claims.load_claims(tmp_path)["demo"]
    assert [c["outcome"] for c in loaded] == [claims.REPRODUCED, claims.NOT_REPRODUCED, claims.NOT_RUN]
    assert loaded[1]["note"] == "Cause: none found" and loaded[0]["wins"] == {"A": 3, "B": 0}
    assert json.loads(json.dumps(loaded))[0]["estimate"]["n_replicates"] == 3
    text = (tmp_path / "demo.json").read_text()
    assert '"replicates": [2.0, 2.2, 1.9]' in text                  # a list of numbers on one line

    page = claims.claims_html("demo", loaded, link_prefix="./")
    assert "./demo.html#sec-demo" in page and "&lt;by far&gt;" in page
    assert page.count("<tr>") == 4 and "claim-not-run" in page
    counts = claims.outcome_counts({"demo": loaded})
    assert counts.loc["demo", claims.REPRODUCED] == 1 and counts.loc["demo", claims.NOT_RUN] == 1
    assert claims.LEGACY_HOLDS not in counts.columns


def test_compact_json_keeps_every_value():
    data = {"a": [1, -2.5e-07, float("nan"), float("-inf")], "b": [[1, 2], [3, 4]], "c": ["x", 1], "d": []}
    text = claims._compact_json(data)
    assert '"a": [1, -2.5e-07, NaN, -Infinity]' in text and '[1, 2]' in text and '"x",' in text
    back = json.loads(text)
    assert back["b"] == data["b"] and back["c"] == data["c"] and back["d"] == [] and math.isnan(back["a"][2])


def noisy_value(seed, shift):
    return float(shift + np.random.default_rng(seed).standard_normal())


def test_replicate_runs_independent_seeds_in_order(tmp_path, monkeypatch):
    monkeypatch.setenv("MCMC_BOOK_CACHE", str(tmp_path))
    results, seeds = claims.replicate(noisy_value, 4, seed=[11, 2], shift=3.0)
    assert seeds == [[11, 2, r] for r in range(4)]
    assert results == [noisy_value([11, 2, r], 3.0) for r in range(4)]
    assert len(set(results)) == 4                      # independent streams, not one seed reused
    with pytest.raises(ValueError, match="n_replicates"):
        claims.replicate(noisy_value, 0, seed=1, shift=0.0)


def test_a_claim_records_the_scale_of_its_evidence(tmp_path, monkeypatch):
    """A default build that shows stored paper-profile results records its claims as paper-scale."""
    monkeypatch.setenv("MCMC_BOOK_PROFILE", "default")
    rule = Rule.greater("x", 0.0, "paper")
    assert claims.ClaimsRegistry("demo", directory=tmp_path).scale() == "default"
    registry = claims.ClaimsRegistry("demo", directory=tmp_path, profile="paper")
    registry.declare("a", statement="s", source="Table 1", published="1", rule=rule)
    registry.decide("a", interval(1, 2))
    registry.declare("b", statement="s", source="Table 1", published="1", rule=rule)
    registry.decide("b", interval(1, 2), profile="smoke")
    registry.not_run("c", statement="s", source="Table 1", published="1", missing="data", cost="1 h")
    assert [c.profile for c in registry.claims] == ["paper", "smoke", "paper"]
    with pytest.raises(ValueError, match="profile"):
        claims.ClaimsRegistry("demo", profile="huge")
    registry.declare("d", statement="s", source="Table 1", published="1", rule=rule)
    with pytest.raises(ValueError, match="profile"):
        registry.decide("d", interval(1, 2), profile="huge")


def test_a_two_dimensional_array_of_replicates_is_refused_not_flattened():
    """Issue 47: a 5 x 2 array read as 10 replicates would narrow the interval by a factor of about 1.5."""
    with pytest.raises(ValueError, match=r"one value per replicate.*shape \(5, 2\)"):
        Estimate.from_replicates(np.arange(10.0).reshape(5, 2))
    assert Estimate.from_replicates(np.arange(5.0)).n_replicates == 5


def test_an_estimate_is_written_at_the_precision_its_interval_supports():
    from mcmc_lib.claims import Estimate
    # the narrower side to one significant digit (two when it is a 1), the value at the same place
    assert Estimate(1.104, 1.096, 1.111, 10).text() == "1.104 [1.096, 1.111]"
    assert Estimate(18191, 17800, 18600, 10).text() == "18,200 [17,800, 18,600]"
    assert Estimate(7.98, 7.74, 8.21, 10).text() == "8.0 [7.7, 8.3]"
    assert Estimate(0.531, 0.52, 0.542, 10).text() == "0.531 [0.520, 0.542]"
    # the ends round outwards: the interval shown contains the one computed
    assert Estimate(279, 246, 315, 10).text() == "280 [240, 320]"
    # an end near zero keeps its sign rather than reading 0
    assert Estimate(0.0034, 0.0004, 0.0064, 10).text() == "0.003 [0.0004, 0.007]"
    # a point, or an explicit number of significant digits
    assert Estimate(1.2, 1.2, 1.2, 1).text() == "1.2 [1.2, 1.2]"
    assert Estimate(1.104, 1.096, 1.111, 10).text(2) == "1.1 [1.1, 1.1]"


def test_win_fraction_refuses_a_name_that_could_not_have_won():
    from mcmc_lib.claims import Estimate
    winners = ["M-CMA"] * 9 + ["AM"]
    # a misspelt name is not "a method that never wins"
    with pytest.raises(ValueError, match="claimed 'MCMA' won none.*competitors="):
        Estimate.win_fraction(winners, "MCMA")
    with pytest.raises(ValueError, match=r"among competitors.*\['MCMA'\]"):
        Estimate.win_fraction(winners, "MCMA", competitors=["M-CMA", "AM", "M-GaA"])
    with pytest.raises(ValueError, match=r"among competitors.*\['AM'\]"):
        Estimate.win_fraction(winners, "M-CMA", competitors=["M-CMA", "M-GaA"])
    with pytest.raises(TypeError, match="winners must be a sequence"):
        Estimate.win_fraction("M-CMA", "M-CMA")
    # a named competitor that won nothing is a real zero
    never = Estimate.win_fraction(winners, "M-GaA", competitors=["M-CMA", "AM", "M-GaA"])
    assert never.value == 0 and never.high > 0
    assert Estimate.win_fraction(winners, "M-CMA").value == pytest.approx(0.9)
