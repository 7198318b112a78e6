"""Polyfills for the ``traceback`` namespace.

``traceback.clear_frames(tb)`` clears the locals of the frames a traceback holds
(``unittest``'s ``assertRaises`` calls it on the exception it caught).  An exception
raised and caught inside traced code has no real frames to clear, so in traced code it
does nothing, as in torch.compile."""

import traceback as _traceback

from . import substitute_for


@substitute_for(_traceback.clear_frames)
def clear_frames(tb):
    """Nothing to clear: traced frames are not real frames."""
    return None
