"""safetensors with tpu tensors: save_file/save_model write what the same
tensors on CPU write, and torch_tpu.load_safetensors / load_model bring them
back onto tpu (safetensors' own device parser rejects "tpu")."""

import pytest
import torch
import torch.nn as nn
from reference import STORED_DTYPES

import torch_tpu

st = pytest.importorskip("safetensors.torch")
from safetensors import SafetensorError  # noqa: E402


def _tensors():
    g = torch.Generator().manual_seed(3)
    out = {}
    for d in STORED_DTYPES:
        if d == torch.bool:
            out[str(d)] = torch.rand(4, 3, generator=g) > 0.5
        elif d.is_floating_point or d.is_complex:
            out[str(d)] = torch.randn(4, 3, generator=g).to(d)
        else:
            out[str(d)] = torch.randint(0, 100, (4, 3), generator=g).to(d)
    out["empty"] = torch.empty(0, 5)
    out["scalar"] = torch.tensor(2.5)
    return out


def test_save_file_of_tpu_tensors_writes_the_cpu_file(tmp_path):
    cpu = _tensors()
    st.save_file(cpu, tmp_path / "cpu.safetensors")
    st.save_file({k: v.to("tpu") for k, v in cpu.items()}, tmp_path / "tpu.safetensors")
    assert (tmp_path / "tpu.safetensors").read_bytes() == (tmp_path / "cpu.safetensors").read_bytes()


@pytest.mark.parametrize("mode", ["strict", "defer_and_fuse"])
def test_load_safetensors_onto_tpu(tmp_path, mode):
    cpu = _tensors()
    st.save_file(cpu, tmp_path / "t.safetensors")
    with torch_tpu.eager_mode(mode):
        loaded = torch_tpu.load_safetensors(tmp_path / "t.safetensors")
        assert set(loaded) == set(cpu)
        for k, v in cpu.items():
            assert loaded[k].device == torch.device("tpu", 0) and loaded[k].dtype == v.dtype, k
            torch.testing.assert_close(loaded[k].cpu(), v, atol=0, rtol=0)
        loaded["torch.float32"].mul_(2)  # an independent tensor the device computes with
        torch.testing.assert_close(loaded["torch.float32"].cpu(), cpu["torch.float32"] * 2, atol=0, rtol=0)


def test_safetensors_own_device_parser_rejects_tpu(tmp_path):
    st.save_file({"a": torch.ones(2)}, tmp_path / "t.safetensors")
    with pytest.raises(SafetensorError, match="device tpu is invalid"):
        st.load_file(tmp_path / "t.safetensors", device="tpu")


def test_save_model_and_load_model_of_a_tpu_model_with_tied_weights(tmp_path):
    torch.manual_seed(0)

    class Tied(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(10, 4)
            self.bn = nn.BatchNorm1d(4)
            self.head = nn.Linear(4, 10, bias=False)
            self.head.weight = self.emb.weight

        def forward(self, idx):
            return self.head(self.bn(self.emb(idx)))

    model = Tied().to("tpu")
    model(torch.randint(0, 10, (8,), device="tpu"))  # BatchNorm statistics move
    st.save_model(model, tmp_path / "m.safetensors")
    fresh = Tied().to("tpu")
    missing, unexpected = st.load_model(fresh, tmp_path / "m.safetensors")
    assert not missing and not unexpected
    assert fresh.head.weight is fresh.emb.weight
    for (k, a), (_, b) in zip(fresh.state_dict().items(), model.state_dict().items()):
        assert a.device.type == "tpu"
        torch.testing.assert_close(a.cpu(), b.cpu(), atol=0, rtol=0, msg=k)
    loaded = torch_tpu.load_safetensors(tmp_path / "m.safetensors")
    assert all(v.device.type == "tpu" for v in loaded.values())


def test_a_truncated_file_raises_safetensors_error(tmp_path):
    st.save_file({"a": torch.randn(100)}, tmp_path / "t.safetensors")
    data = (tmp_path / "t.safetensors").read_bytes()
    (tmp_path / "t.safetensors").write_bytes(data[: len(data) - 40])
    with pytest.raises(SafetensorError) as expected:
        st.load_file(tmp_path / "t.safetensors")
    with pytest.raises(SafetensorError) as actual:
        torch_tpu.load_safetensors(tmp_path / "t.safetensors")
    assert str(actual.value) == str(expected.value)
