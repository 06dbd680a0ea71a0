#[derive(Debug, thiserror::Error)]
pub enum NightError {
    #[error(transparent)]
    Store(#[from] reverie_store::StoreError),
    #[error(transparent)]
    Infer(#[from] reverie_infer::InferError),
    #[error(transparent)]
    Train(#[from] reverie_train::TrainError),
    #[error(transparent)]
    Model(#[from] reverie_models::ModelError),
    #[error(transparent)]
    Practice(#[from] reverie_practice::PracticeError),
    #[error("{0}")]
    Io(String),
    #[error("{0}")]
    Config(String),
    #[error("the night was cancelled; the current model is kept")]
    Cancelled,
}
