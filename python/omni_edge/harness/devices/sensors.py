"""What a device says about its state while it works: CPU clocks, temperatures, battery.

One `sh` script reads every source in one round trip (a phone through ADB, the host directly);
a source the device lacks is simply absent, and `coverage()` says in words what each figure is
and is not (a battery current is the whole device's draw, never "NPU energy").
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field
from typing import Any

_SECTIONS = {
    "cpufreq": "for f in /sys/devices/system/cpu/cpu[0-9]*/cpufreq/scaling_cur_freq; do "
               "[ -r \"$f\" ] && echo \"${f#/sys/devices/system/cpu/} $(cat \"$f\")\"; done",
    "cpuinfo": "grep -i '^cpu MHz' /proc/cpuinfo",
    "thermal": "for z in /sys/class/thermal/thermal_zone*; do [ -r \"$z/temp\" ] && "
               "echo \"${z##*/} $(cat \"$z/temp\") $(cat \"$z/type\")\"; done",
    "power": "for d in /sys/class/power_supply/*; do [ -r \"$d/current_now\" ] && "
             "echo \"${d##*/} $(cat \"$d/current_now\") $(cat \"$d/voltage_now\" 2>/dev/null || echo -)\"; done",
    "battery": "dumpsys battery",
}


def sensor_script() -> tuple[str, str]:
    """The script and the marker its sections start with."""
    marker = f"__OE_SENSE_{secrets.token_hex(4)}__"
    return "; ".join(f"echo {marker}{name}; {cmd} 2>/dev/null" for name, cmd in _SECTIONS.items()), marker


@dataclass
class SensorSample:
    t: float                                                  # seconds since the run started
    cpu_mhz: dict[str, float] = field(default_factory=dict)   # per CPU (cpufreq) or per line of /proc/cpuinfo
    cpu_source: str = ""                                      # "cpufreq" or "cpuinfo"
    thermal_c: dict[str, float] = field(default_factory=dict)
    # current_ma (its sign as the kernel reports it), voltage_v, level, temperature_c
    battery: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"t": round(self.t, 3), "cpu_mhz": self.cpu_mhz, "cpu_source": self.cpu_source,
                "thermal_c": self.thermal_c, "battery": self.battery}


def _number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def parse_sensors(text: str, marker: str, t: float) -> SensorSample:
    sections: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in text.splitlines():
        if line.startswith(marker):
            current = sections.setdefault(line[len(marker):].strip(), [])
        elif current is not None and line.strip():
            current.append(line.strip())
    sample = SensorSample(t=t)
    for line in sections.get("cpufreq", []):
        name, _, value = line.partition(" ")
        khz = _number(value)
        if khz is not None:
            sample.cpu_mhz[name.split("/")[0]] = khz / 1000
    if sample.cpu_mhz:
        sample.cpu_source = "cpufreq"
    else:
        for i, line in enumerate(sections.get("cpuinfo", [])):
            mhz = _number(line.partition(":")[2].strip())
            if mhz is not None:
                sample.cpu_mhz[f"cpu{i}"] = mhz
        sample.cpu_source = "cpuinfo" if sample.cpu_mhz else ""
    for line in sections.get("thermal", []):
        parts = line.split(" ", 2)
        millideg = _number(parts[1]) if len(parts) >= 2 else None
        if millideg is not None:
            name = parts[2] if len(parts) == 3 and parts[2] else parts[0]
            sample.thermal_c[name if name not in sample.thermal_c else f"{name} ({parts[0]})"] = millideg / 1000
    for line in sections.get("power", []):
        parts = line.split()
        micro_amps = _number(parts[1]) if len(parts) >= 2 else None
        micro_volts = _number(parts[2]) if len(parts) >= 3 else None
        if micro_amps is not None and "current_ma" not in sample.battery:
            sample.battery["current_ma"] = micro_amps / 1000
            if micro_volts is not None:
                sample.battery["voltage_v"] = micro_volts / 1e6
    for line in sections.get("battery", []):
        name, sep, value = line.partition(":")
        number = _number(value.strip())
        if sep and number is not None and name.strip() in ("level", "temperature", "voltage"):
            key = {"level": "level", "temperature": "temperature_c", "voltage": "voltage_v"}[name.strip()]
            scale = {"level": 1, "temperature_c": 10, "voltage_v": 1000}[key]  # dumpsys: tenths of °C, mV
            sample.battery.setdefault(key, number / scale)
    return sample


def coverage(samples: list[SensorSample]) -> dict[str, str]:
    """What each series covers on this device, in words."""
    last = samples[-1] if samples else SensorSample(t=0)
    cpu = {"cpufreq": "each CPU's current clock (cpufreq scaling_cur_freq)",
           "cpuinfo": "'cpu MHz' of /proc/cpuinfo (on a VM the hypervisor's figure, not a measured clock)",
           "": "not readable on this device"}[last.cpu_source]
    thermal = (f"{len(last.thermal_c)} thermal zones (/sys/class/thermal), each the sensor its type names"
               if last.thermal_c else "no thermal zone readable on this device")
    battery = ("the whole device's battery current/voltage (power_supply or dumpsys battery): every component's "
               "draw together, never the NPU's or this process's energy" if last.battery
               else "no battery on this device (or not readable)")
    return {"cpu_mhz": cpu, "thermal_c": thermal, "battery": battery,
            "latency": "per request, from the controller's own clock", "rss_mb": "the profiled process's RSS"}
