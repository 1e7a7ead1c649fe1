//! How the index runs SQL: as an indexed table's owner in a security-restricted operation
//! (`owner`), through statements prepared once per backend (`prepared`), reading SPI results
//! (`spi`), the progress NOTICEs of long maintenance calls (`progress`), rows passed to and
//! returned by internal functions (`row`), and blocks that catch errors in a subtransaction
//! (`subxact`). It uses no other room of the index.

pub(super) mod owner;
pub(super) mod prepared;
pub(super) mod progress;
pub(super) mod row;
pub(super) mod spi;
pub(super) mod subxact;
