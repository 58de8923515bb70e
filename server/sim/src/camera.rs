//! A synthetic camera: a small JPEG of a gradient with a block that
//! follows the robot's first joint, so the picture visibly moves.

use jpeg_encoder::{ColorType, Encoder};

pub const WIDTH: u16 = 96;
pub const HEIGHT: u16 = 72;

/// One frame for joint value `phase` (any float; only its fraction matters).
pub fn frame(phase: f32, tint: u8) -> Vec<u8> {
    let (w, h) = (usize::from(WIDTH), usize::from(HEIGHT));
    let centre = ((phase.sin() * 0.4 + 0.5) * w as f32) as usize;
    let mut pixels = Vec::with_capacity(w * h * 3);
    for y in 0..h {
        for x in 0..w {
            let block = x.abs_diff(centre) < 10 && y.abs_diff(h / 2) < 10;
            if block {
                pixels.extend_from_slice(&[240, 190, 40]);
            } else {
                pixels.extend_from_slice(&[tint / 2, (y * 200 / h) as u8, (x * 255 / w) as u8]);
            }
        }
    }
    let mut out = Vec::new();
    match Encoder::new(&mut out, 60).encode(&pixels, WIDTH, HEIGHT, ColorType::Rgb) {
        Ok(()) => out,
        Err(_) => Vec::new(),
    }
}
