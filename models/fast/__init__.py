"""numba fast paths; each equals its numpy reference bit for bit (tested)."""
