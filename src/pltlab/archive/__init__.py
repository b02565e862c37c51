"""Page archives: one page model, HAR 1.2 on disk, importers (HAR, the seed fetch format), a
synthetic page generator and the bundled TFO-paper corpus."""

from pltlab.archive.model import Obj, Page

__all__ = ["Obj", "Page"]
