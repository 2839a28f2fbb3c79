"""The published code's study (docs/studies/REPRODUCTION.md): ``published`` runs the authors'
``BALLAD.py`` on our data files, ``ablation`` measures which of its differences move the
paper's numbers; ``python -m scripts.studies.authors_code``."""
