"""Lesson 13: the tiny Llama's decode loop on the ExecuTorch runtime gives eager's greedy tokens; its KV cache is
planned memory of the program."""

from __future__ import annotations

import pytest

from helpers import course

LM = course.lesson(13)


def test_the_runtime_decodes_the_same_tokens_as_eager_generate_for_every_prompt():
    program = LM.lower_decode_step()
    for prompt in LM.PROMPTS:
        eager = LM.eager_tokens(prompt)
        assert len(eager) == LM.NEW_TOKENS and len(set(eager)) > 1, eager  # a real, varied continuation
        assert LM.device_tokens(program, prompt) == eager, prompt


def test_the_comparison_can_fail_a_loop_that_passes_the_wrong_position():
    """A loop that writes every token at slot 0 (a position that is not the token's) attends to one slot only: its
    tokens differ from eager's, and the comparison says so."""
    import torch

    program = LM.lower_decode_step()
    prompt = LM.PROMPTS[0]
    stuck = LM.greedy(lambda ids, position: program.run_raw(ids, torch.zeros_like(position))[0], prompt)
    assert stuck != LM.eager_tokens(prompt)


def test_the_cache_is_part_of_the_memory_plan():
    rows = LM.arena_by_cache_len()
    for small, large in zip(rows, rows[1:]):
        assert large["arena bytes"] - small["arena bytes"] >= large["KV cache bytes"] - small["KV cache bytes"] > 0
    buffers = {r["buffer"]: r for r in LM.cache_buffers()}
    assert sum(r["bytes"] for name, r in buffers.items() if "cumulative" not in name) == LM.kv_bytes(LM.MAX_CACHE_LEN)


def test_a_position_past_the_cache_is_refused_by_the_runtime_as_the_card_says():
    import pytest
    import torch

    from helpers import RuntimeRejectedError

    program = LM.lower_decode_step()
    program.run_raw(torch.tensor([[5]]), torch.tensor([LM.MAX_CACHE_LEN - 1]))  # the last slot is fine
    with pytest.raises(RuntimeRejectedError, match=f"Index {LM.MAX_CACHE_LEN} is out of bounds for input dimension 2 "
                                                   f"with size {LM.MAX_CACHE_LEN}"):
        program.run_raw(torch.tensor([[5]]), torch.tensor([LM.MAX_CACHE_LEN]))
    card = next(c for c in LM.CARDS if c.id == "13.static_cache")
    assert f"Index {LM.MAX_CACHE_LEN} is out of bounds for input dimension 2 with size {LM.MAX_CACHE_LEN}" in \
        card.follow_ups[0][1]


def test_the_host_check_refuses_exactly_what_the_cache_cannot_hold():
    import pytest

    LM.check_fits(list(range(21)))  # 21 + 12 - 1 = 32 slots: the last one fits
    LM.check_fits(list(range(25)), new_tokens=8)
    for prompt, new in ((list(range(22)), 12), (list(range(25)), 9), ([], 1)):
        with pytest.raises(ValueError):
            LM.check_fits(prompt, new_tokens=new)
    program = LM.lower_decode_step()
    assert len(LM.device_tokens(program, list(range(1, 22)))) == LM.NEW_TOKENS  # what the check lets through runs


def test_the_held_back_cards_say_what_the_runs_say():
    cards = {c.id: c for c in LM.CARDS}
    rows = LM.arena_by_cache_len((16, 64))
    per_slot = (rows[1]["arena bytes"] - rows[0]["arena bytes"]) // (64 - 16)
    assert f"{per_slot:,} bytes of arena per slot for {LM.kv_bytes(1)} bytes of cache" in \
        cards["13.arena_per_slot"].answer
    # the int program refuses position 1 (tested in the lesson); fed 0 on every call it runs, silently wrong
    program = LM.lower_decode_step(step_class=LM.IntPositionStep)
    prompt = LM.PROMPTS[0]
    always_zero = LM.greedy(lambda ids, position: program.run_raw(ids, 0)[0], prompt)
    assert always_zero != LM.eager_tokens(prompt)
    assert "write every token into slot 0" in cards["13.second_token_refused"].follow_ups[1][1]


def test_prefill_methods_with_one_shared_cache_decode_the_same_tokens_as_eager_at_every_bucket_edge():
    """The Dim prefill and the buckets, at each bucket's exact size, one past it, and the longest prompt whose answer
    still fits the cache: the same tokens as eager ``generate``."""
    dim, buckets = LM.lower_prefill_decode("dim"), LM.lower_prefill_decode("buckets")
    longest = LM.MAX_CACHE_LEN - LM.NEW_TOKENS + 1
    for n in (1, 8, 9, 16):
        prompt = [(7 * i + 3) % 256 for i in range(n)]
        eager = LM.eager_tokens(prompt)
        assert LM.prefill_then_decode(dim, prompt) == eager, n
        assert LM.prefill_then_decode(buckets, prompt) == eager, n
    prompt = [(11 * i + 5) % 256 for i in range(longest)]
    LM.check_fits(prompt)
    assert LM.prefill_then_decode(dim, prompt) == LM.eager_tokens(prompt)
    with pytest.raises(ValueError, match="fits no bucket"):
        LM.prefill_then_decode(buckets, prompt)  # 21 tokens: longer than the largest bucket, refused on the host


def test_without_shared_mutable_buffers_decode_attends_to_a_cache_prefill_never_wrote():
    separate = LM.lower_prefill_decode("dim", share_mutable_buffers=False)
    for prompt in LM.PROMPTS:
        eager, device = LM.eager_tokens(prompt), LM.prefill_then_decode(separate, prompt)
        assert device[0] == eager[0] and device != eager, prompt  # prefill's own token, then decode's own cache
    places = {r["method"]: r for r in LM.cache_in_plan(separate)}
    assert places["prefill"]["arena"] == places["decode"]["arena"] == [1]
    assert places["prefill"]["buffers"] == places["decode"]["buffers"] == 2 * LM.CONFIG["num_hidden_layers"]


def test_the_dim_prefill_is_planned_for_its_largest_prompt():
    """Its arena is the same whatever prompt it is given, and larger than the 16-token bucket's; the delegation
    reasons it adds name the symbolic length."""
    dim, buckets = LM.lower_prefill_decode("dim"), LM.lower_prefill_decode("buckets")
    assert dim.planned_memory_bytes("prefill") > buckets.planned_memory_bytes("prefill_16") > \
        buckets.planned_memory_bytes("prefill_8")
    assert dim.runtime_input_shapes("prefill") == [(1, LM.MAX_CACHE_LEN), (LM.MAX_CACHE_LEN,)]
    assert dim.delegation("prefill").coverage < buckets.delegation("prefill_16").coverage


def test_executorchs_llm_runner_generates_generates_tokens_and_prints_nothing(capfd):
    """TextLLMRunner on the program with its metadata: the same greedy tokens as ``generate``, a long prompt too (it
    prefills one token per call); its C++ output (tokens, statistics with timestamps, log) stays out of the cell."""
    program = LM.lower_for_runner()
    capfd.readouterr()
    for prompt in (*LM.PROMPTS, tuple(range(100, 114))):
        assert LM.runner_tokens(program, prompt) == LM.eager_tokens(prompt), prompt
    out, err = capfd.readouterr()
    assert out == "" and err == "", (out[:300], err[:300])


def test_the_runner_refuses_a_program_without_its_metadata_with_its_own_reason():
    with pytest.raises(RuntimeError, match="model.pte: Required metadata method get_max_seq_len not found"):
        LM.runner_tokens(LM.lower_decode_step(), LM.PROMPTS[0])


def test_the_prefill_state_card_says_what_the_runs_say():
    card = next(c for c in LM.CARDS if c.id == "13.prefill_state")
    dim, buckets = LM.lower_prefill_decode("dim"), LM.lower_prefill_decode("buckets")
    said = card.follow_ups[1][1]
    assert f"its arena was {dim.planned_memory_bytes('prefill'):,} bytes against " \
           f"{buckets.planned_memory_bytes('prefill_16'):,} for a 16-token bucket" in said
    assert dim.delegation("prefill").coverage < buckets.delegation("prefill_16").coverage  # "delegated less"
    separate = LM.lower_prefill_decode("dim", share_mutable_buffers=False)
    tokens, eager = LM.prefill_then_decode(separate, LM.PROMPTS[1]), LM.eager_tokens(LM.PROMPTS[1])
    assert tokens[0] == eager[0] and tokens[1] != eager[1]  # "the error starts at the second new token"


def _answer(code: str, **globals_):
    from helpers import exercises

    exercise = exercises.get("13.position")
    namespace = {**exercise.context(), **globals_}
    exec(compile(code, f"<answer {len(code)} {sorted(globals_)}>", "exec"), namespace)
    return namespace["answer"]


def test_a_rechecked_answer_is_recognised_by_its_source_and_what_its_globals_stand_for():
    """The exercise skips the export for an answer it has built before; "the same" means the same class source and
    the same values of the globals it reads, and anything it cannot describe gets no shortcut."""
    import linecache

    code = ("class S(lm.AppStep):\n    def forward(self, input_ids, cache_position):\n"
            "        return self.cached(input_ids=input_ids, cache_position=cache_position + SHIFT)\nanswer = S\n")
    filename = "<13 fingerprint test>"
    linecache.cache[filename] = (len(code), None, code.splitlines(True), filename)  # as a notebook cell is
    from helpers import exercises

    def build(**globals_):
        namespace = {**exercises.get("13.position").context(), **globals_}
        exec(compile(code, filename, "exec"), namespace)
        return namespace["answer"]

    first, again, shifted = build(SHIFT=0), build(SHIFT=0), build(SHIFT=1)
    assert first is not again
    assert LM._answer_fingerprint(first) == LM._answer_fingerprint(again) is not None
    assert LM._answer_fingerprint(shifted) != LM._answer_fingerprint(first)
    assert LM._answer_fingerprint(build(SHIFT=[0])) is None  # a list: what it holds may change, no shortcut


def test_a_class_that_names_itself_is_fingerprinted_without_recursing():
    from helpers import exercises

    answer = exercises.get("13.position").build(
        "class S(lm.AppStep):\n    def forward(self, input_ids, cache_position):\n"
        "        return super(S, self).forward(input_ids, cache_position)\nanswer = S\n")
    assert LM._answer_fingerprint(answer) is not None


def test_a_starter_checked_after_the_solution_still_fails_on_the_device():
    from helpers import exercises

    exercise = exercises.get("13.position")
    assert exercise.check(exercise.solution).passed
    grade = exercise.check(exercise.starter)
    assert not grade.passed and "differs from eager's, with no error" in grade.feedback, grade.report()


def test_the_prefill_cost_card_says_what_the_runs_say():
    """13.prefill_cost's figures: each strategy's arena and delegated share as the programs have them, the token by
    token calls, the 21-token prompt refused by the buckets and taken by the Dim prefill."""
    card = next(c for c in LM.CARDS if c.id == "13.prefill_cost")
    decode, dim, buckets = LM.lower_decode_step(), LM.lower_prefill_decode("dim"), LM.lower_prefill_decode("buckets")
    said = " ".join(card.answer.split())
    assert (f"its arena was {dim.planned_memory_bytes('prefill'):,} bytes and "
            f"{dim.delegation('prefill').coverage:.0%} of its nodes".replace("%", " %")) in said
    assert f"against {decode.planned_memory_bytes():,} bytes for the decode step" in said
    assert (f"{buckets.planned_memory_bytes('prefill_16'):,} bytes for the 16-token bucket and "
            f"{buckets.delegation('prefill_16').coverage:.0%} delegated".replace("%", " %")) in said
    assert [calls for calls, _ in LM._first_token_calls(14)] == [14, 1, 1]  # n calls token by token, one prefill call
    declined = {d["op"] for d in LM.declined_only_by_dim()}
    assert any("slice" in op for op in declined), declined  # "declines, among others, a slice of symbolic size"
    prompt = list(range(1, 22))
    LM.check_fits(prompt)
    with pytest.raises(ValueError, match="fits no bucket"):
        LM.prefill_then_decode(buckets, prompt)
    assert LM.prefill_then_decode(dim, prompt) == LM.eager_tokens(prompt)


def test_the_decode_step_exported_non_strict_fails_to_lower_and_the_diagnosis_names_the_lifted_writes():
    """Why the lesson exports with ``strict=True``: torch.export's default, non-strict, does not find the static
    cache's tensors (reached through the cache object) among the module's buffers, though the wrapper registers the
    same tensors: it lifts them as constants, which the graph writes in place, and no buffer is written. Lowering then
    fails with an assertion of torch's that names nothing; the diagnosis names the written constants and the fix."""
    import torch

    import helpers

    with torch.no_grad():
        d = helpers.diagnose_export(LM.DecodeStep(LM.tiny_llama()), LM.step_example(), backend="portable")
    assert d.stage == "lower" and "expected compiled_fn to be GraphModule" in d.message, d
    lifted = {name: (tuple(t.shape), t.dtype) for name, t in d.exported.constants.items() if "lifted_tensor" in name}
    layers = LM.CONFIG["num_hidden_layers"]
    assert sorted(lifted.values(), key=str) == sorted([((), torch.int64)] * layers  # a position counter per layer
                                                      + [((1, 2, LM.MAX_CACHE_LEN, 16), torch.float32)] * 2 * layers,
                                                      key=str), lifted  # and its keys and values
    assert all(f"`{name}`" in d.summary for name in lifted), d.summary
    assert not [s for s in d.exported.graph_signature.output_specs if s.kind.name == "BUFFER_MUTATION"]
    assert "strict=True" in d.fix
