"""The server's machinery: a whole class training on one machine, or on a Ray cluster.

    capacity   the training budget, shared by cost: a queue, a share per session, step turns
    jobs       training in the background for the app: events a page polls, Stop, checkpoints saved
    workers    the training process beside the server: every run a thread there, niced, events through a pipe
    pages_first  a run steps aside while the server draws a page: the count of pages drawn, shared
    priority   how a training process, a Ray actor or a server's training thread is lowered, on each platform
    shutdown   a process that trains ends in order: threads joined, training processes ended, before teardown
    ray_runs   every run as an actor of a Ray cluster (RNNLAB_RAY_ADDRESS)
    spaces     each browser's own folder under a key the server signs (or a signed-in person's), its quota, swept
    board      the class board: the runs students chose to show, kept with their losses in a SQLite file
    board_losses  its losses: written as each run trains, its job let go once it ends; ranked at equal time
    uploads    an uploaded checkpoint, read as one job of the budget

May import lab.errors, lab.schema, lab.settings, lab.data, lab.nets and lab.training; never the instruments
or the pages.
"""
