"""SADAL's published code beside ``Settings.sadal()`` (issue 23): ``published`` runs a
user's copy of the published code on SADAL's splits, ``agreement`` plays the preset on the
same episodes and compares."""
