"""Pure geometry: mesh topology, alignment transforms, warps."""
