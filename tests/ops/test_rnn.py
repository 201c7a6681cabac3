"""nn.LSTM / nn.GRU and their cells on tpu against CPU: ATen runs them on a
non-CPU device through the fused cells (_thnn_fused_lstm_cell,
_thnn_fused_gru_cell) and their backwards, lowered in csrc/lower/rnn.cpp.
A model trains one SGD step on both devices and must agree in outputs,
final states, gradients and updated weights, in each eager mode and under
torch.compile."""

import copy

import pytest
import torch
from reference import assert_close
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

import torch_tpu

ATOL, RTOL = 1e-5, 1e-4  # float32, recurrences of a few steps


def states_of(hidden):
    return list(hidden) if isinstance(hidden, tuple) else [hidden]


def sgd_step(model, x, run=lambda m, x: m(x)):
    """Forward, a loss over every output, backward and one SGD step; returns
    the outputs, the gradients and the updated parameters."""
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    out, hidden = run(model, x)
    loss = (out * torch.linspace(-1, 1, out.numel(), device=out.device).view(out.shape)).sum()
    loss = loss + sum((h * h).sum() for h in states_of(hidden))
    loss.backward()
    grads = [p.grad.detach().clone() for p in model.parameters()]
    opt.step()
    return [out, *states_of(hidden)], grads, [p.detach() for p in model.parameters()]


def check_training_matches_cpu(model, x, run=lambda m, x: m(x)):
    on_tpu = copy.deepcopy(model).to("tpu")
    expected = sgd_step(model, x, run)
    actual = sgd_step(on_tpu, x.to("tpu"), run)
    for name, a, e in zip(("outputs", "gradients", "parameters"), actual, expected):
        assert_close(a, e, ATOL, RTOL, msg=name)


@pytest.mark.parametrize("mode", ["strict", "defer_and_fuse"])
@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("cls", [torch.nn.LSTM, torch.nn.GRU])
def test_multilayer_bidirectional_rnn_trains_like_cpu(cls, bias, batch_first, mode):
    model = cls(4, 6, num_layers=2, bidirectional=True, bias=bias, batch_first=batch_first)
    x = torch.randn((3, 5, 4) if batch_first else (5, 3, 4))
    with torch_tpu.eager_mode(mode):
        check_training_matches_cpu(model, x)


@pytest.mark.parametrize("cls", [torch.nn.LSTM, torch.nn.GRU])
def test_rnn_from_a_given_initial_state_matches_cpu(cls):
    model = cls(3, 5, num_layers=2).eval()
    x = torch.randn(4, 2, 3)
    h0 = torch.randn(2, 2, 5)
    state = (h0, torch.randn(2, 2, 5)) if cls is torch.nn.LSTM else h0
    expected = model(x, state)
    actual = copy.deepcopy(model).to("tpu")(x.to("tpu"), torch.utils._pytree.tree_map(lambda t: t.to("tpu"), state))
    assert_close(list(actual[:1]) + states_of(actual[1]), list(expected[:1]) + states_of(expected[1]), ATOL, RTOL)


@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("cls", [torch.nn.LSTM, torch.nn.GRU])
def test_packed_sequences_train_like_cpu(cls, batch_first):
    model = cls(4, 5, num_layers=2, bidirectional=True, batch_first=batch_first)
    x = torch.randn((3, 6, 4) if batch_first else (6, 3, 4))
    lengths = torch.tensor([4, 6, 2])  # unsorted: packing sorts and unsorts

    def run(m, x):
        packed = pack_padded_sequence(x, lengths, batch_first=batch_first, enforce_sorted=False)
        out, hidden = m(packed)
        padded, out_lengths = pad_packed_sequence(out, batch_first=batch_first)
        assert out_lengths.tolist() == lengths.tolist()
        return padded, hidden

    check_training_matches_cpu(model, x, run)


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("cls", [torch.nn.LSTMCell, torch.nn.GRUCell])
def test_cells_train_like_cpu(cls, bias):
    cell = cls(4, 5, bias=bias)
    x = torch.randn(3, 4)

    def run(m, x):
        h = None
        for step in range(3):  # the state feeds back: its gradient flows through the cell's own
            h = m(x * (step + 1), h)
        return (h[0], h) if isinstance(h, tuple) else (h, h)

    check_training_matches_cpu(cell, x, run)


@pytest.mark.parametrize("cls", [torch.nn.LSTMCell, torch.nn.GRUCell])
def test_cells_in_bfloat16_match_cpu(cls):
    cell = cls(8, 16).to(torch.bfloat16)
    x = torch.randn(4, 8, dtype=torch.bfloat16)
    expected = cell(x)
    actual = copy.deepcopy(cell).to("tpu")(x.to("tpu"))
    assert_close(states_of(actual), states_of(expected), atol=2e-2, rtol=2e-2)


@pytest.mark.parametrize("cls", [torch.nn.LSTM, torch.nn.GRU])
def test_compiled_model_with_rnn_trains_like_cpu(cls):
    class Tagger(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.rnn = cls(4, 6, num_layers=2, bidirectional=True, batch_first=True)
            self.head = torch.nn.Linear(12, 3)

        def forward(self, x):
            out, hidden = self.rnn(x)
            return self.head(torch.tanh(out)), hidden

    model = Tagger()
    x = torch.randn(2, 5, 4)
    compiled = torch.compile(copy.deepcopy(model).to("tpu"), backend="tpu")
    expected = sgd_step(model, x)
    actual = sgd_step(compiled, x.to("tpu"))
    for name, a, e in zip(("outputs", "gradients", "parameters"), actual, expected):
        assert_close(a, e, ATOL, RTOL, msg=name)


def test_compiled_cell_step_matches_cpu():
    # Dynamo traces cells (unlike nn.LSTM, which it runs eagerly): the fused
    # cell is then a node of the graph the tpu backend lowers.
    cell = torch.nn.LSTMCell(4, 5)
    x, h, c = torch.randn(3, 4), torch.randn(3, 5), torch.randn(3, 5)
    on_tpu = copy.deepcopy(cell).to("tpu")
    step = torch.compile(lambda x, h, c: on_tpu(x, (h, c)), backend="tpu")
    expected = cell(x, (h, c))
    actual = step(x.to("tpu"), h.to("tpu"), c.to("tpu"))
    assert_close(list(actual), list(expected), ATOL, RTOL)


def raised(fn, *args):
    try:
        fn(*args)
    except Exception as e:  # noqa: BLE001 - the type is what is compared
        return type(e)
    return None


@pytest.mark.parametrize("cls", [torch.nn.LSTM, torch.nn.GRU])
def test_bad_inputs_raise_as_on_cpu(cls):
    model = cls(4, 5)
    on_tpu = copy.deepcopy(model).to("tpu")
    wrong = torch.randn(1, 2, 7)

    def wrong_state(m, d):
        return m(torch.randn(3, 2, 4, device=d), (wrong.to(d),) * 2 if cls is torch.nn.LSTM else wrong.to(d))

    cases = [
        wrong_state,  # a state of the wrong hidden size
        lambda m, d: m(torch.randn(3, 2, 4, dtype=torch.float64, device=d)),  # float64 input, float32 weights
        lambda m, d: m(torch.randn(3, 2, 6, device=d)),  # the wrong input size
    ]
    for case in cases:
        expected = raised(case, model, "cpu")
        assert expected is not None
        assert raised(case, on_tpu, "tpu") is expected


def test_fused_cells_check_sizes_as_cuda():
    gates = torch.randn(2, 12, device="tpu")
    with pytest.raises(RuntimeError):
        torch.ops.aten._thnn_fused_gru_cell(gates, gates, torch.randn(2, 5, device="tpu"))  # 12 / 3 != 5
    with pytest.raises(RuntimeError):
        torch.ops.aten._thnn_fused_lstm_cell(gates, gates[:, :8], torch.randn(2, 3, device="tpu"))


@pytest.mark.parametrize("cls", [torch.nn.LSTM, torch.nn.GRU])
def test_rnn_modules_compile_into_one_tpu_graph_when_dynamo_traces_them(cls):
    # Dynamo graph-breaks on nn.RNN/LSTM/GRU on purpose, for every backend,
    # unless torch._dynamo.config.allow_rnn is set; then the whole
    # multi-layer bidirectional recurrence is one tpu graph, forward and
    # backward, and trains like CPU.
    import torch._dynamo as dynamo

    model = cls(4, 6, num_layers=2, bidirectional=True, batch_first=True)
    x = torch.randn(2, 5, 4)
    on_tpu = copy.deepcopy(model).to("tpu")
    with dynamo.config.patch(allow_rnn=True):
        explained = dynamo.explain(lambda m, x: m(x))(on_tpu, x.to("tpu"))
        assert (explained.graph_count, explained.graph_break_count) == (1, 0)
        dynamo.reset()
        compiled = torch.compile(on_tpu, backend="tpu", fullgraph=True)
        torch_tpu.reset_metrics()
        actual = sgd_step(compiled, x.to("tpu"))
        assert torch_tpu.metrics()["graphs"]["graph_calls"] >= 2  # the forward and the backward graph ran
    expected = sgd_step(model, x)
    for name, a, e in zip(("outputs", "gradients", "parameters"), actual, expected):
        assert_close(a, e, ATOL, RTOL, msg=name)
