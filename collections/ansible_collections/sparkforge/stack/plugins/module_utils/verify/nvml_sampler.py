# -*- coding: utf-8 -*-
# Copyright: sparkforge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The NVML sampler of verify's benchmarks: SM and memory clock, power, temperature and throttle reasons read in a
thread while the benchmarks run, so each figure says whether its clocks can be trusted (gpu_clocks judges them).

Like the check script it serves (torch_check_script.py), this file runs on the host with the stack venv's python,
which cannot import the collection: it imports only the standard library at the top (pynvml inside), and
torch_checks.run_script writes it beside the script, which loads it by path.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import time


class Nvml(object):
    """NVML read in a thread while the benchmarks run: SM and memory clock, power, temperature, throttle reasons.

    Samples are [time, sm_mhz, mem_mhz, power_w, temp_c, reasons bitmask]; each benchmark keeps those of its
    timed window, and torch_checks summarises and judges them.  Without nvidia-ml-py (pynvml) or a driver
    that answers, ``error`` says why and the figures are reported without clocks."""

    def __init__(self, uuid, interval):
        import threading
        self.samples = []
        self.info = {"available": False}
        self.error = None
        self._stop = threading.Event()
        self.interval = interval
        try:
            import pynvml as nv
            nv.nvmlInit()
            try:
                handle = nv.nvmlDeviceGetHandleByUUID(uuid) if uuid else None
            except Exception:
                handle = None
            if handle is None:
                handle = nv.nvmlDeviceGetHandleByIndex(int((os.environ.get("CUDA_VISIBLE_DEVICES") or "0").split(",")[0]))
            self.nv, self.handle = nv, handle
            self.reasons = (getattr(nv, "nvmlDeviceGetCurrentClocksEventReasons", None) or
                            nv.nvmlDeviceGetCurrentClocksThrottleReasons)
            self.info = {"available": True, "interval_s": interval}
            for key, func in (("power_limit_w", lambda: nv.nvmlDeviceGetEnforcedPowerLimit(handle) / 1000.0),
                              ("default_power_limit_w", lambda: nv.nvmlDeviceGetPowerManagementDefaultLimit(handle) / 1000.0),
                              ("max_sm_mhz", lambda: nv.nvmlDeviceGetMaxClockInfo(handle, nv.NVML_CLOCK_SM)),
                              ("max_mem_mhz", lambda: nv.nvmlDeviceGetMaxClockInfo(handle, nv.NVML_CLOCK_MEM)),
                              ("slowdown_temp_c", lambda: nv.nvmlDeviceGetTemperatureThreshold(
                                  handle, nv.NVML_TEMPERATURE_THRESHOLD_SLOWDOWN)),
                              ("driver", nv.nvmlSystemGetDriverVersion)):
                try:
                    value = func()
                    self.info[key] = value.decode() if isinstance(value, bytes) else value
                except Exception:
                    self.info[key] = None
            self._thread = threading.Thread(target=self._run, name="sparkforge-nvml")
            self._thread.daemon = True
            self._thread.start()
        except Exception as exc:  # noqa: no pynvml, no NVML library, no answer
            self.error = "%s: %s" % (type(exc).__name__, exc)
            self.info = {"available": False, "error": self.error}

    def _run(self):
        nv, handle = self.nv, self.handle
        while not self._stop.is_set():
            try:
                self.samples.append([round(time.time(), 3), nv.nvmlDeviceGetClockInfo(handle, nv.NVML_CLOCK_SM),
                                     nv.nvmlDeviceGetClockInfo(handle, nv.NVML_CLOCK_MEM),
                                     round(nv.nvmlDeviceGetPowerUsage(handle) / 1000.0, 1),
                                     nv.nvmlDeviceGetTemperature(handle, nv.NVML_TEMPERATURE_GPU), int(self.reasons(handle))])
            except Exception as exc:  # noqa
                self.error = "%s: %s" % (type(exc).__name__, exc)
            self._stop.wait(self.interval)

    def window(self, t0, t1):
        return [s for s in self.samples if t0 <= s[0] <= t1]

    def stop(self):
        self._stop.set()
