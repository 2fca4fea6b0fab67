//! The metrics recorder of a test binary that reads the crate's metrics: a `metrics-util`
//! debugging recorder, installed once per process at the first read.

use std::sync::OnceLock;

use metrics_util::debugging::{DebuggingRecorder, Snapshotter};

/// The binary's snapshotter; its recorder is installed on the first call. A snapshot swaps
/// counters and gauges to 0: what it reads is what changed since the last one.
pub fn snapshotter() -> &'static Snapshotter {
    static SNAPSHOTTER: OnceLock<Snapshotter> = OnceLock::new();
    SNAPSHOTTER.get_or_init(|| {
        let recorder = DebuggingRecorder::new();
        let snapshotter = recorder.snapshotter();
        recorder
            .install()
            .expect("the only recorder of this binary");
        snapshotter
    })
}
