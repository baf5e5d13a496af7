"""Stage timers and resource telemetry (RSS on CPU, NVML on GPU)."""
