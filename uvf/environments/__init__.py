"""The MuJoCo maze environments of HIRO (AntMaze, AntPush, AntFall, PointMaze, ...)."""
