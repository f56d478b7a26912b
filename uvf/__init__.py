"""HIRO / UVF (Nachum et al. 2018, 2019) for TensorFlow 2: a faithful port of tensorflow/models research/efficient-hrl."""
