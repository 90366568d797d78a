"""The shared widget, driven headlessly with the real runtime behind it."""

from __future__ import annotations

import ipywidgets as w
import torch

import helpers
from helpers import models as M
from helpers.widgets import ParityExplorer


def build(static_config):
    model, art, (x,) = static_config
    base = torch.randn(4, 4, generator=torch.Generator().manual_seed(0))
    return ParityExplorer(
        model, art, lambda batch, sign: (sign * base[:batch].abs(),),
        controls={"batch": w.IntSlider(value=2, min=1, max=4),
                  "sign": w.ToggleButtons(options=[("positive", 1.0), ("negative", -1.0)])})


def test_verdict_follows_the_controls(static_config):
    explorer = build(static_config)
    assert explorer.verdict == "match"
    assert "data-verdict='match'" in explorer.output.value
    row = explorer.set(batch=3)
    assert row.status == "rejected" and explorer.verdict == "rejected"
    assert "data-verdict='rejected'" in explorer.output.value and "static tensor" in explorer.output.value
    explorer.controls["batch"].value = 2  # as the slider would
    assert explorer.verdict == "match"
    assert explorer.set(sign=-1.0).verdict == "match"


def test_flag_flipped_in_the_app_diverges(static_config):
    model, art, (x,) = static_config
    flipped = M.ConfigBranch(use_residual=False)
    explorer = ParityExplorer(model, art, lambda residual: (x,),
                              controls={"residual": w.Checkbox(value=True)},
                              model_for=lambda residual: model if residual else flipped)
    assert explorer.verdict == "match"
    assert explorer.set(residual=False).verdict == "diverge"
    assert "max |Δ|" in explorer.output.value


def test_display_text_is_short_and_stable(static_config):
    explorer = build(static_config)
    bundle = explorer._repr_mimebundle_()
    assert bundle["text/plain"] == "ParityExplorer — verdict now: match"
    assert "application/vnd.jupyter.widget-view+json" in bundle


def test_outside_contract_is_labelled(token_pool):
    model, art, (ids, mask), _ = token_pool
    explorer = ParityExplorer(model, art, lambda n: (ids[:, :1].repeat(1, n), torch.ones(1, n)),
                              controls={"n": w.IntSlider(value=16, min=0, max=80)})
    assert explorer.verdict == "match"
    assert explorer.set(n=1).verdict == "outside contract (match)"  # below min: the runtime ran it anyway
    assert explorer.set(n=70).verdict == "rejected"
    assert isinstance(explorer.row, helpers.ParityRow)


def test_predict_then_reveal_checks_the_answer(static_config):
    from helpers.widgets import PredictThenReveal

    _, art, _ = static_config

    def reveal():
        row = helpers.check_one(M.ConfigBranch(), art, (torch.randn(3, 4),))
        return row.status, row.runtime_message

    quiz = PredictThenReveal("batch 3 on a batch-2 export?", ["match", "diverge", "rejected"], reveal)
    assert quiz.answer("rejected") is True and quiz.actual == "rejected"
    assert "data-verdict='rejected'" in quiz.result.value and "✓ right" in quiz.result.value
    assert quiz.answer("match") is False and "you predicted match" in quiz.result.value


def test_a_wrong_prediction_reads_why_it_is_wrong_first():
    from helpers.widgets import PredictThenReveal

    explanation = "0 > 0 is False.\nNot 'true': the edge goes to the false side.\nNot 'maybe': no such side."
    quiz = PredictThenReveal("sign of 0?", ["true", "false", "maybe"], lambda: ("false", explanation))
    quiz.answer("maybe")
    shown = quiz.result.value
    assert shown.index("0 &gt; 0") < shown.index("Not &#x27;maybe&#x27;") < shown.index("Not &#x27;true&#x27;")
    assert "<b class='exportlab-your-pick'>Not &#x27;maybe&#x27;" in shown
    quiz.answer("false")
    assert "exportlab-your-pick" not in quiz.result.value  # a right prediction reads the explanation as it is


def test_predict_then_reveal_acknowledges_a_new_prediction_and_hides_the_old_answer():
    from helpers.widgets import PredictThenReveal

    calls = []
    quiz = PredictThenReveal("sign of 0?", ["true", "false"], lambda: (calls.append(1) or "false", "0 > 0 is False"))
    quiz.choice.value = "true"
    assert "data-prediction='true'" in quiz.result.value and "press Reveal" in quiz.result.value
    assert not calls  # choosing does not run the model; only Reveal does
    quiz.button.click()
    assert "✗ you predicted true" in quiz.result.value and "data-prediction='true'" in quiz.result.value
    quiz.choice.value = "false"
    assert "data-verdict" not in quiz.result.value and "data-prediction='false'" in quiz.result.value
    quiz.button.click()
    assert "✓ right" in quiz.result.value and len(calls) == 2


def test_set_refreshes_once_for_several_controls(static_config):
    explorer = build(static_config)
    calls = []
    original = explorer.refresh
    explorer.refresh = lambda: calls.append(1) or original()
    explorer.set(batch=3, sign=-1.0)
    assert len(calls) == 1 and explorer.verdict == "rejected"
