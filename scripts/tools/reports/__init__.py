"""The reports' generated tables (``generated``) and the landing page's answer figure
(``winners``); ``python -m scripts.tools.reports [--check] [--figures]``."""
