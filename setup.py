"""rlds_reverb: RLDS datasets to TF-Agents trajectories in Reverb tables."""

import setuptools

# A set that installs and imports together on Python 3.11.
INSTALL_REQUIRES = [
    'tensorflow==2.15.1',
    'dm-reverb==0.14.0',
    'tf-agents==0.19.0',
    'tensorflow-probability==0.23.0',
    'tensorflow-datasets==4.9.4',
    # Newer ones need protobuf 5; TensorFlow 2.15 pins protobuf 4.
    'tensorflow-metadata>=1.13,<1.16',
    'rlds==0.1.8',
    # TensorFlow and Reverb take any grpcio; from 1.75 on it needs
    # typing-extensions 4.12, which tf-agents 0.19's pin (4.5) forbids. Pinned,
    # pip does not download and reject twenty grpcio wheels to find that out.
    'grpcio==1.74.0',
    'dm-tree>=0.1.8',
    'numpy>=1.23.5,<2',
    # TFDS' dataset writer needs it and does not declare it.
    'importlib_resources>=5',
    'gym==0.23.0',
    'tqdm>=4.60',
    # Raw snappy, for the chunks of Reverb checkpoints (export): one 2 MB
    # wheel with no dependencies.
    'cramjam==2.13.0',
    # CRC32C of each record of a checkpoint built offline (TensorFlow's
    # reader checks them): C, hardware-accelerated; one 37 KB wheel with no
    # dependencies. numpy's table-driven CRC ran 4x slower per item record.
    'google-crc32c==1.9.0',
]

setuptools.setup(
    name='rlds_reverb',
    version='0.1.0',
    description='RLDS datasets to TF-Agents trajectories in Reverb tables.',
    packages=setuptools.find_namespace_packages(
        include=['rlds_reverb', 'rlds_reverb.*'], exclude=['*.__pycache__']),
    python_requires='>=3.11,<3.12',
    install_requires=INSTALL_REQUIRES,
    extras_require={
        # The tests run inspect --plot, in two processes (pytest-xdist).
        # and reads back the Atari frames of benchmarks/ale_frames.py (3 MB).
        'test': ['pytest>=7', 'pytest-xdist==3.6.1',
                 'matplotlib>=3.7,<3.10', 'ale-py==0.12.1'],
        'plot': ['matplotlib>=3.7,<3.10'],
        # EnvLogger 1.2 (1.3 needs glibc 2.38): scripts/make_cartpole_dataset.py
        # and the benchmarks comparing with it. RldsRecorder does not use it.
        'record': ['envlogger==1.2'],
        # rlds_reverb.beam and `push/build --runner`. Resolved with the pins
        # above; alone on top, pip once moved protobuf to 6, which breaks
        # TF 2.15. dask[distributed] for `--runner dask` (Beam's DaskRunner):
        # 2026.8.0 resolves with them (cloudpickle 3.1, msgpack, tornado).
        'beam': ['apache-beam==2.77.0', 'protobuf>=3.20.3,<5',
                 'dask[distributed]==2026.8.0'],
        # The docs site: `mkdocs build --strict` (docs/development.md). The
        # API page reads the docstrings from the sources (griffe), importing
        # nothing.
        'docs': ['mkdocs==1.6.1', 'mkdocstrings==1.0.8',
                 'mkdocstrings-python==2.0.11'],
        # benchmarks/ale_frames.py: real Atari frames (the ROMs ship in the
        # wheel); numpy is its only dependency.
        'bench': ['ale-py==0.12.1'],
    },
    include_package_data=True,
    package_data={'rlds_reverb': ['data/**/*']},
    entry_points={'console_scripts': ['rlds-reverb=rlds_reverb.cli:main']},
)
