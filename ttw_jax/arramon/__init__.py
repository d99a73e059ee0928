"""ArraMon (Kim et al. 2020): navigate, pick up and assemble, twice, with cascading errors; records,
synthetic cities, the simulator and its reference, the V/L baseline, nDTW / CTC-k / rPOD / PTC."""
