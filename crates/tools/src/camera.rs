//! Where `capture_webcam` gets a frame. The app plugs in a real camera; a
//! machine without one gets [`NoCamera`] and its clear error; tests use
//! [`SyntheticCamera`] behind the same trait.

/// One RGB frame, 8 bits per channel, rows top to bottom.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    pub width: u32,
    pub height: u32,
    pub rgb: Vec<u8>,
}

impl Frame {
    /// The frame as a PNG file.
    pub fn to_png(&self) -> Result<Vec<u8>, String> {
        let mut out = Vec::new();
        {
            let mut enc = png::Encoder::new(&mut out, self.width, self.height);
            enc.set_color(png::ColorType::Rgb);
            enc.set_depth(png::BitDepth::Eight);
            let mut w = enc.write_header().map_err(|e| e.to_string())?;
            w.write_image_data(&self.rgb).map_err(|e| e.to_string())?;
        }
        Ok(out)
    }
}

pub trait FrameSource: Send + Sync {
    /// Captures one frame, or says why it cannot.
    fn capture(&self) -> Result<Frame, String>;
}

/// The source on a machine where no camera was set up.
pub struct NoCamera;

impl FrameSource for NoCamera {
    fn capture(&self) -> Result<Frame, String> {
        Err("no camera is available on this machine (none was found or none is connected); ask the user to attach a photo instead".into())
    }
}

/// A camera that returns a fixed test pattern; `n` counts captures so
/// successive frames differ.
pub struct SyntheticCamera {
    pub width: u32,
    pub height: u32,
    count: std::sync::atomic::AtomicU32,
}

impl SyntheticCamera {
    pub fn new(width: u32, height: u32) -> SyntheticCamera {
        SyntheticCamera {
            width,
            height,
            count: Default::default(),
        }
    }
}

impl FrameSource for SyntheticCamera {
    fn capture(&self) -> Result<Frame, String> {
        let n = self.count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let mut rgb = Vec::with_capacity((self.width * self.height * 3) as usize);
        for y in 0..self.height {
            for x in 0..self.width {
                rgb.extend_from_slice(&[
                    (x * 255 / self.width.max(1)) as u8,
                    (y * 255 / self.height.max(1)) as u8,
                    (n * 40) as u8,
                ]);
            }
        }
        Ok(Frame {
            width: self.width,
            height: self.height,
            rgb,
        })
    }
}

/// The first video device (Video4Linux), through nokhwa.
#[cfg(feature = "webcam")]
pub struct DeviceCamera;

#[cfg(feature = "webcam")]
impl FrameSource for DeviceCamera {
    fn capture(&self) -> Result<Frame, String> {
        use nokhwa::pixel_format::RgbFormat;
        use nokhwa::utils::{CameraIndex, RequestedFormat, RequestedFormatType};
        let no_camera = |e: nokhwa::NokhwaError| {
            format!("no camera could be opened ({e}); check that one is connected and that Reverie may use it, or ask the user to attach a photo instead")
        };
        let format =
            RequestedFormat::new::<RgbFormat>(RequestedFormatType::AbsoluteHighestResolution);
        let mut camera = nokhwa::Camera::new(CameraIndex::Index(0), format).map_err(no_camera)?;
        camera.open_stream().map_err(no_camera)?;
        let buffer = camera.frame().map_err(no_camera);
        let _ = camera.stop_stream();
        let image = buffer?
            .decode_image::<RgbFormat>()
            .map_err(|e| format!("the camera's frame could not be decoded: {e}"))?;
        Ok(Frame {
            width: image.width(),
            height: image.height(),
            rgb: image.into_raw(),
        })
    }
}
