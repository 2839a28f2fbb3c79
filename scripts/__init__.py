"""The research, run from a clone and never installed: ``scripts.studies`` (one package per
study, each run as ``python -m scripts.studies.<study>``) and ``scripts.tools`` (the
documentation's generators and the maintainers' registry builder)."""
