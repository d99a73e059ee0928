"""Batches built on device from environments and dataset arrays."""
