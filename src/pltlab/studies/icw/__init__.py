"""The initial-congestion-window study (Yahoo! CDN, IMC 2011): `pltlab reproduce icw`.

Modules: page (the Yahoo-like page), pcaptrace (PLT from the emulator's packet trace),
loads (one measured load with its trace), stats (geometric means, bootstrap CIs),
study (the four runners), report (tables, figures, checks, reproduce_icw), commands (typer).
"""

from pltlab.run.traced import check_icw
from pltlab.studies.icw.page import yahoo_page

__all__ = ["check_icw", "yahoo_page"]
