//! The interactive chat's terminal: what happened scrolls up as ordinary lines (the terminal's
//! own scrollback keeps them), and the bottom rows are redrawn in place: the answer's unfinished
//! line, the status line, the input line and the footer with the keys.
//!
//! Every bottom row is cut to the terminal's width, so none wraps and the cursor's way back to
//! the top of them is always the same number of rows. Text from the model or a tool is shown
//! without its control characters, so it cannot move the cursor or change the terminal.
//! Generic over the writer: the tests draw into a buffer and read it with a terminal emulator.

use std::io::{self, Write};

use crossterm::cursor::{MoveToColumn, MoveUp};
use crossterm::style::{Attribute, SetAttribute};
use crossterm::terminal::{Clear, ClearType};
use crossterm::{QueueableCommand, queue};
use unicode_width::{UnicodeWidthChar, UnicodeWidthStr};

/// The prompt before the input line.
pub const PROMPT: &str = "› ";

/// The bottom rows, as the loop wants them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Bottom {
    /// The status line.
    pub status: String,
    /// The input line's visible text (or the question being asked).
    pub input: String,
    /// The cursor's column in `input`.
    pub cursor: usize,
    /// The keys that work now.
    pub footer: String,
}

/// The terminal.
pub struct Screen<W: Write> {
    out: W,
    width: usize,
    /// The answer's line still being written.
    partial: String,
    /// Rows from the top of the drawn bottom rows to the cursor, while they are drawn.
    drawn: Option<u16>,
    bottom: Bottom,
}

impl<W: Write> Screen<W> {
    /// A screen `width` columns wide, drawing on `out` from the cursor's line.
    pub fn new(out: W, width: u16) -> Screen<W> {
        Screen {
            out,
            width: usize::from(width.max(1)),
            partial: String::new(),
            drawn: None,
            bottom: Bottom::default(),
        }
    }

    /// The columns the input line has after the prompt.
    pub fn input_width(&self) -> usize {
        self.width.saturating_sub(PROMPT.width()).max(1)
    }

    /// The terminal was resized.
    ///
    /// # Errors
    /// Writing to the terminal failed.
    pub fn resize(&mut self, width: u16) -> io::Result<()> {
        // Rows drawn for the old width may have been rewrapped by the terminal: from the
        // cursor's row down is what can be cleared for sure.
        self.erase()?;
        self.width = usize::from(width.max(1));
        self.draw()
    }

    /// Draws `bottom` (only when it changed).
    ///
    /// # Errors
    /// Writing to the terminal failed.
    pub fn set_bottom(&mut self, bottom: Bottom) -> io::Result<()> {
        if self.drawn.is_some() && bottom == self.bottom {
            return Ok(());
        }
        self.bottom = bottom;
        self.draw()
    }

    /// More of the answer's text: its whole lines scroll up, the rest waits on the bottom row.
    ///
    /// # Errors
    /// Writing to the terminal failed.
    pub fn text(&mut self, delta: &str) -> io::Result<()> {
        self.partial.push_str(&clean(delta));
        let Some(end) = self.partial.rfind('\n') else {
            return self.draw();
        };
        let rest = self.partial.split_off(end + 1);
        let done = std::mem::replace(&mut self.partial, rest);
        let lines: Vec<&str> = done.trim_end_matches('\n').split('\n').collect();
        self.print(&lines)
    }

    /// The answer's text stops: its last line scrolls up.
    ///
    /// # Errors
    /// Writing to the terminal failed.
    pub fn end_text(&mut self) -> io::Result<()> {
        if self.partial.is_empty() {
            return Ok(());
        }
        let last = std::mem::take(&mut self.partial);
        self.print(&[&last])
    }

    /// A whole line (after the answer's unfinished line, which ends first).
    ///
    /// # Errors
    /// Writing to the terminal failed.
    pub fn line(&mut self, text: &str) -> io::Result<()> {
        self.end_text()?;
        let text = clean(text);
        let lines: Vec<&str> = text.split('\n').collect();
        self.print(&lines)
    }

    /// Clears the bottom rows and leaves the cursor on a fresh line below what was printed
    /// (the answer's unfinished line is printed first).
    ///
    /// # Errors
    /// Writing to the terminal failed.
    pub fn leave(&mut self) -> io::Result<()> {
        let last = std::mem::take(&mut self.partial);
        self.erase()?;
        if !last.is_empty() {
            write!(self.out, "{last}\r\n")?;
        }
        self.out.flush()
    }

    /// The writer (the tests read what was drawn).
    #[cfg(test)]
    pub fn out(&self) -> &W {
        &self.out
    }

    fn print(&mut self, lines: &[&str]) -> io::Result<()> {
        self.erase()?;
        for line in lines {
            write!(self.out, "{line}\r\n")?;
        }
        self.draw()
    }

    /// Clears the bottom rows, leaving the cursor where their top was.
    fn erase(&mut self) -> io::Result<()> {
        if let Some(up) = self.drawn.take() {
            self.out.queue(MoveToColumn(0))?;
            if up > 0 {
                self.out.queue(MoveUp(up))?;
            }
            self.out.queue(Clear(ClearType::FromCursorDown))?;
        }
        Ok(())
    }

    fn draw(&mut self) -> io::Result<()> {
        self.erase()?;
        let width = self.width;
        let mut up = 0;
        if !self.partial.is_empty() {
            write!(self.out, "{}\r\n", tail(&self.partial, width))?;
            up += 1;
        }
        dim(&mut self.out, &fit(&self.bottom.status, width))?;
        write!(self.out, "\r\n")?;
        up += 1;
        let input = fit(&format!("{PROMPT}{}", self.bottom.input), width);
        write!(self.out, "{input}\r\n")?;
        dim(&mut self.out, &fit(&self.bottom.footer, width))?;
        let column = (PROMPT.width() + self.bottom.cursor).min(width - 1);
        queue!(self.out, MoveUp(1), MoveToColumn(column as u16))?;
        self.drawn = Some(up);
        self.out.flush()
    }
}

fn dim(out: &mut impl Write, text: &str) -> io::Result<()> {
    queue!(out, SetAttribute(Attribute::Dim))?;
    write!(out, "{text}")?;
    queue!(out, SetAttribute(Attribute::Reset))
}

/// Text without control characters (line ends kept, tabs as spaces).
fn clean(text: &str) -> String {
    text.replace('\t', "    ")
        .chars()
        .filter(|c| *c == '\n' || !c.is_control())
        .collect()
}

/// The start of `text` that fits in `width` columns (`…` at the end when cut).
fn fit(text: &str, width: usize) -> String {
    if text.width() <= width {
        return text.to_owned();
    }
    let mut out = String::new();
    let mut used = 0;
    for c in text.chars() {
        let w = c.width().unwrap_or(0);
        if used + w + 1 > width {
            break;
        }
        out.push(c);
        used += w;
    }
    out.push('…');
    out
}

/// The end of `text` that fits in `width` columns (`…` at the start when cut).
fn tail(text: &str, width: usize) -> String {
    if text.width() <= width {
        return text.to_owned();
    }
    let mut kept: Vec<char> = Vec::new();
    let mut used = 1;
    for c in text.chars().rev() {
        let w = c.width().unwrap_or(0);
        if used + w > width {
            break;
        }
        kept.push(c);
        used += w;
    }
    std::iter::once('…').chain(kept.into_iter().rev()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The screen a terminal `width` columns wide shows after `bytes`, trailing blanks cut.
    fn shown(bytes: &[u8], width: u16) -> Vec<String> {
        let nz = |n: u16| std::num::NonZero::new(n).unwrap();
        let mut parser = vt100::Parser::new(nz(12), nz(width), 0);
        parser.process(bytes);
        let rows: Vec<String> = parser
            .screen()
            .rows(0, width)
            .map(|r| r.trim_end().to_owned())
            .collect();
        let last = rows
            .iter()
            .rposition(|r| !r.is_empty())
            .map_or(0, |i| i + 1);
        rows[..last].to_vec()
    }

    fn bottom(status: &str, input: &str) -> Bottom {
        Bottom {
            status: status.into(),
            input: input.into(),
            cursor: input.chars().count(),
            footer: "Enter send · Esc cancel".into(),
        }
    }

    #[test]
    fn lines_scroll_up_and_the_bottom_rows_are_drawn_once() {
        let mut s = Screen::new(Vec::new(), 30);
        s.set_bottom(bottom("idle", "")).unwrap();
        s.line("› hello").unwrap();
        s.set_bottom(bottom("working · step 1", "more")).unwrap();
        s.text("The answer ").unwrap();
        s.text("is\nforty-two").unwrap();
        s.line("→ bash ls").unwrap();
        s.set_bottom(bottom("idle", "")).unwrap();
        assert_eq!(
            shown(s.out(), 30),
            [
                "› hello",
                "The answer is",
                "forty-two",
                "→ bash ls",
                "idle",
                "›",
                "Enter send · Esc cancel"
            ]
        );
    }

    #[test]
    fn a_narrow_terminal_cuts_the_bottom_rows_instead_of_wrapping_them() {
        let mut s = Screen::new(Vec::new(), 12);
        for i in 0..5 {
            s.set_bottom(bottom(&format!("working · step {i} · running bash"), "abc"))
                .unwrap();
            s.text("a long unfinished line of text").unwrap();
        }
        let rows = shown(s.out(), 12);
        assert_eq!(
            rows,
            ["…ine of text", "working · s…", "› abc", "Enter send …"],
            "every bottom row once, none wrapped"
        );
        s.leave().unwrap();
        assert!(shown(s.out(), 12).join("").contains("a long"));
    }

    #[test]
    fn control_characters_of_the_model_are_not_sent_to_the_terminal() {
        let mut s = Screen::new(Vec::new(), 40);
        s.line("red \u{1b}[31mtext\u{7}\ttab").unwrap();
        let rows = shown(s.out(), 40);
        assert_eq!(rows[0], "red [31mtext    tab");
    }
}
