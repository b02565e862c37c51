"""PLT predicted from a page's structure, without emulation (docs/explain.md "Predict"):
simulate.predict for one page and configuration, pages.predict_pages for what `pltlab predict`
names."""
