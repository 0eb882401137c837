// Threads and the monotonic clock come from OSThread; every user of AudioCore gets them too.
@_exported import OSThread
