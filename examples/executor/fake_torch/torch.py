"""A stand-in for the part of PyTorch that run_schedule.py uses, for its tests
on a machine without a GPU. It runs every command at once and keeps what a
GPU run can fail on: device memory, counted by the lifetime of the tensors
that hold it (CPython frees an object when its last reference goes) against
the cap the executor sets, the refusal past that cap, and a device index the
cap must name. A compute takes its `_sleep` cycles at a made-up clock, so the
times it reports are the plan's own."""

uint8 = "uint8"
_CYCLES_PER_MS = 1_000_000.0
_TOTAL_BYTES = 141 * 10**9
_state = {"cap": _TOTAL_BYTES, "used": 0, "now_ms": 0.0}


class OutOfMemoryError(RuntimeError):
    pass


class device:
    def __init__(self, kind, index=None):
        self.type, self.index = kind, index


class Tensor:
    def __init__(self, nbytes, on_device):
        self._nbytes, self._on_device = nbytes, False
        if on_device:
            if _state["used"] + nbytes > _state["cap"]:
                raise OutOfMemoryError(f"{nbytes} bytes above the cap ({_state['used']} of {_state['cap']} used)")
            self._on_device = True
            _state["used"] += nbytes

    def __del__(self):
        if self._on_device:
            _state["used"] -= self._nbytes

    def numel(self):
        return self._nbytes

    def __getitem__(self, key):
        return _View(self, key)

    def copy_(self, other, non_blocking=False):
        return self

    def record_stream(self, stream):
        pass


class _View:
    def __init__(self, base, key):
        self.base, self.key = base, key

    def copy_(self, other, non_blocking=False):
        return self


def empty(nbytes, dtype=None, device=None, pin_memory=False):
    return Tensor(nbytes, device is not None)


class _Properties:
    total_memory = _TOTAL_BYTES


class _Event:
    def __init__(self, enable_timing=False):
        self.at_ms = None

    def record(self, stream=None):
        self.at_ms = _state["now_ms"]

    def synchronize(self):
        pass

    def elapsed_time(self, end):
        return end.at_ms - self.at_ms


class _Stream:
    def wait_event(self, event):
        pass

    def wait_stream(self, stream):
        pass


class _StreamContext:
    def __init__(self, stream):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


class _Cuda:
    Event = _Event
    Stream = _Stream

    @staticmethod
    def is_available():
        return True

    @staticmethod
    def current_device():
        return 0

    @staticmethod
    def get_device_properties(dev):
        return _Properties()

    @staticmethod
    def set_per_process_memory_fraction(fraction, dev):
        if getattr(dev, "index", dev) is None:
            raise ValueError("Expected a torch.device with a specified index or an integer, but got:cuda")
        _state["cap"] = int(fraction * _TOTAL_BYTES)

    @staticmethod
    def stream(stream):
        return _StreamContext(stream)

    @staticmethod
    def synchronize():
        pass

    @staticmethod
    def _sleep(cycles):
        _state["now_ms"] += cycles / _CYCLES_PER_MS


cuda = _Cuda()
