"""On-device environments: pure `reset`/`step` over state dataclasses, vmapped and scanned."""
