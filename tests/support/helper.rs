//! A helper process a test starts — a stand-in of an outside service, written against that
//! service's own SDK — that prints what the test needs on its first line of stdout and is killed
//! when the test drops it.

use std::{
    io::{BufRead, BufReader},
    process::{Child, Command, Stdio},
};

pub struct Helper {
    child: Child,
}

impl Drop for Helper {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Helper {
    /// Start `command` and read its first line (trimmed); the rest of its stdout is drained, so
    /// a helper that logs there never dies of a closed pipe.
    pub fn start(mut command: Command) -> (Helper, String) {
        let mut child = command
            .stdout(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("{command:?} starts: {e}"));
        let mut out = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        out.read_line(&mut line).unwrap();
        std::thread::spawn(move || out.lines().for_each(drop));
        (Helper { child }, line.trim().to_owned())
    }
}
