from types import SimpleNamespace

import pytest

from aerorl_ops.telemetry import GpuReading, NullGpuReader, NvmlReader, parse_visible_devices

MIB = 1024 * 1024


class FakeNvml:
    """Stands in for the ``pynvml`` module: two devices, the second without power readings."""

    class NVMLError(Exception):
        pass

    def __init__(self, init_fails: bool = False) -> None:
        self.init_fails = init_fails
        self.initialised = False
        self.shutdowns = 0
        self.devices = [
            {"name": b"NVIDIA H100 80GB HBM3", "uuid": "GPU-aaaa", "util": 37, "used": 2048 * MIB, "power_mw": 123_500},
            {"name": "NVIDIA A10G", "uuid": "GPU-bbbb", "util": 5, "used": 512 * MIB, "power_mw": None},
        ]

    def nvmlInit(self):
        if self.init_fails:
            raise self.NVMLError("NVML Shared Library Not Found")
        self.initialised = True

    def nvmlShutdown(self):
        self.shutdowns += 1

    def nvmlDeviceGetCount(self):
        return len(self.devices)

    def nvmlDeviceGetHandleByIndex(self, index):
        return index

    def nvmlDeviceGetName(self, handle):
        return self.devices[handle]["name"]

    def nvmlDeviceGetUUID(self, handle):
        return self.devices[handle]["uuid"]

    def nvmlDeviceGetUtilizationRates(self, handle):
        return SimpleNamespace(gpu=self.devices[handle]["util"], memory=0)

    def nvmlDeviceGetMemoryInfo(self, handle):
        return SimpleNamespace(used=self.devices[handle]["used"], total=80 * 1024 * MIB)

    def nvmlDeviceGetPowerUsage(self, handle):
        if self.devices[handle]["power_mw"] is None:
            raise self.NVMLError("Not Supported")
        return self.devices[handle]["power_mw"]


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, None),
        ("", []),
        ("0", [0]),
        (" 1 , 0 ", [1, 0]),
        ("GPU-aaaa,1", ["GPU-aaaa", 1]),
        ("0,MIG-xyz,1", [0]),
        ("-1,0", []),
    ],
)
def test_parse_visible_devices_follows_cuda_rules(value, expected):
    assert parse_visible_devices(value) == expected


def test_reader_converts_units_and_marks_unsupported_values_none():
    nvml = FakeNvml()
    reader = NvmlReader.open(nvml=nvml, visible_devices=None)

    assert isinstance(reader, NvmlReader)
    assert reader.names == ("NVIDIA H100 80GB HBM3", "NVIDIA A10G")
    assert reader.read() == [
        GpuReading(index=0, name="NVIDIA H100 80GB HBM3", utilization_pct=37.0, memory_used_mb=2048.0, power_w=123.5),
        GpuReading(index=1, name="NVIDIA A10G", utilization_pct=5.0, memory_used_mb=512.0, power_w=None),
    ]
    reader.close()
    reader.close()
    assert nvml.shutdowns == 1
    with pytest.raises(RuntimeError, match="after close"):
        reader.read()


@pytest.mark.parametrize(
    ("visible", "indices"),
    [("1", [1]), ("1,0", [1, 0]), ("GPU-bbbb", [1]), ("0,7,1", [0]), ("0,0", [0])],
)
def test_reader_reads_only_visible_devices(visible, indices):
    with NvmlReader.open(nvml=FakeNvml(), visible_devices=visible) as reader:
        assert [reading.index for reading in reader.read()] == indices


def test_reader_reads_cuda_visible_devices_when_opened(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    with NvmlReader.open(nvml=FakeNvml()) as reader:
        assert reader.names == ("NVIDIA A10G",)


def test_no_visible_device_gives_null_reader_and_shuts_nvml_down():
    nvml = FakeNvml()
    reader = NvmlReader.open(nvml=nvml, visible_devices="")
    assert isinstance(reader, NullGpuReader)
    assert reader.read() == []
    assert nvml.shutdowns == 1


def test_failed_init_gives_null_reader():
    nvml = FakeNvml(init_fails=True)
    reader = NvmlReader.open(nvml=nvml)
    assert isinstance(reader, NullGpuReader)
    assert nvml.shutdowns == 0


def test_real_pynvml_without_driver_gives_null_reader():
    pynvml = pytest.importorskip("pynvml")
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError:
        pass
    else:
        pynvml.nvmlShutdown()
        pytest.skip("an NVIDIA driver is present; this test covers machines without one")
    assert isinstance(NvmlReader.open(), NullGpuReader)
